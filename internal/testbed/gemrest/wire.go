package gemrest

// The JSON shapes of the Gemini REST API that this package reads and
// writes: only the fields it uses. Unknown fields are ignored on decode.

type wireRequest struct {
	Contents          []wireContent  `json:"contents"`
	SystemInstruction *wireContent   `json:"systemInstruction,omitempty"`
	GenerationConfig  *wireGenConfig `json:"generationConfig,omitempty"`
}

type wireGenConfig struct {
	ResponseMimeType string `json:"responseMimeType,omitempty"`
	MaxOutputTokens  int    `json:"maxOutputTokens,omitempty"`
}

type wireContent struct {
	Role  string     `json:"role,omitempty"`
	Parts []wirePart `json:"parts"`
}

type wirePart struct {
	Text string `json:"text"`
	// Thought marks a thinking model's reasoning, which is not part of the
	// answer.
	Thought bool `json:"thought,omitempty"`
}

type wireResponse struct {
	Candidates     []wireCandidate     `json:"candidates"`
	PromptFeedback *wirePromptFeedback `json:"promptFeedback"`
	UsageMetadata  *wireUsage          `json:"usageMetadata"`
	ModelVersion   string              `json:"modelVersion"`
	ResponseID     string              `json:"responseId"`
}

type wireCandidate struct {
	Content      *wireContent `json:"content"`
	FinishReason string       `json:"finishReason"`
}

type wirePromptFeedback struct {
	BlockReason string `json:"blockReason"`
}

type wireUsage struct {
	PromptTokenCount     int64 `json:"promptTokenCount"`
	CandidatesTokenCount int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount   int64 `json:"thoughtsTokenCount"`
	// CachedContentTokenCount is the part of the prompt served from a
	// context cache.
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
}

type wireModelList struct {
	Models []struct {
		Name                       string   `json:"name"`
		SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	} `json:"models"`
	NextPageToken string `json:"nextPageToken"`
}
