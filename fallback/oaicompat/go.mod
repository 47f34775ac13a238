module github.com/tierguard/tierguard/fallback/oaicompat

go 1.26.0

toolchain go1.26.11

require (
	github.com/openai/openai-go/v3 v3.99.0
	github.com/stretchr/testify v1.12.1
	github.com/tierguard/tierguard v0.1.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/text v0.44.0 // indirect
)
