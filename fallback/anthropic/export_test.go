package anthropic

// UsageOf exposes how a message's usage is reported to the chain.
var UsageOf = usage
