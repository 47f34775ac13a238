package fakegemini

import (
	"encoding/json"
	"strings"
)

// Gemini request (only what the fake reads; unknown fields are ignored).

type gemRequest struct {
	Contents          []gemContent  `json:"contents"`
	SystemInstruction *gemContent   `json:"systemInstruction"`
	GenerationConfig  *gemGenConfig `json:"generationConfig"`
}

type gemGenConfig struct {
	ResponseMimeType   string          `json:"responseMimeType"`
	ResponseSchema     json.RawMessage `json:"responseSchema"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
}

type gemContent struct {
	Parts []gemPart `json:"parts,omitempty"`
	Role  string    `json:"role,omitempty"`
}

type gemPart struct {
	Text string `json:"text"`
}

func (g *gemRequest) prompt() string {
	var parts []string
	add := func(c *gemContent) {
		for _, p := range c.Parts {
			if p.Text != "" {
				parts = append(parts, p.Text)
			}
		}
	}
	if g.SystemInstruction != nil {
		add(g.SystemInstruction)
	}
	for i := range g.Contents {
		add(&g.Contents[i])
	}
	return strings.Join(parts, "\n")
}

func (g *gemRequest) wantsJSON() bool {
	c := g.GenerationConfig
	if c == nil {
		return false
	}
	return strings.HasPrefix(c.ResponseMimeType, "application/json") ||
		len(c.ResponseSchema) > 0 || len(c.ResponseJSONSchema) > 0
}

// Gemini response.

type gemResponse struct {
	// Candidates is any so that an empty, non-nil list is written as []
	// while a nil one is left out.
	Candidates     any                `json:"candidates,omitempty"`
	PromptFeedback *gemPromptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *gemUsage          `json:"usageMetadata,omitempty"`
	ModelVersion   string             `json:"modelVersion,omitempty"`
	ResponseID     string             `json:"responseId,omitempty"`
}

type gemCandidate struct {
	Content       *gemContent       `json:"content,omitempty"`
	FinishReason  string            `json:"finishReason,omitempty"`
	SafetyRatings []gemSafetyRating `json:"safetyRatings,omitempty"`
	Index         int               `json:"index"`
}

type gemSafetyRating struct {
	Category    string `json:"category"`
	Probability string `json:"probability"`
	Blocked     bool   `json:"blocked,omitempty"`
}

type gemPromptFeedback struct {
	BlockReason   string            `json:"blockReason,omitempty"`
	SafetyRatings []gemSafetyRating `json:"safetyRatings,omitempty"`
}

type gemUsage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount      int `json:"totalTokenCount"`
}

func safetyRatings(blocked bool) []gemSafetyRating {
	return []gemSafetyRating{
		{Category: "HARM_CATEGORY_SEXUALLY_EXPLICIT", Probability: "NEGLIGIBLE"},
		{Category: "HARM_CATEGORY_HATE_SPEECH", Probability: "NEGLIGIBLE"},
		{Category: "HARM_CATEGORY_HARASSMENT", Probability: "HIGH", Blocked: blocked},
		{Category: "HARM_CATEGORY_DANGEROUS_CONTENT", Probability: "NEGLIGIBLE"},
	}
}

// Gemini model resource.

type gemModel struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	Description                string   `json:"description,omitempty"`
	InputTokenLimit            int      `json:"inputTokenLimit"`
	OutputTokenLimit           int      `json:"outputTokenLimit"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	Temperature                float64  `json:"temperature"`
	TopP                       float64  `json:"topP"`
	TopK                       int      `json:"topK"`
	MaxTemperature             float64  `json:"maxTemperature"`
}

type gemModelList struct {
	Models        []gemModel `json:"models"`
	NextPageToken string     `json:"nextPageToken,omitempty"`
}

// OpenAI chat completions request and response.

type oaiRequest struct {
	Model          string       `json:"model"`
	Messages       []oaiMessage `json:"messages"`
	Stream         bool         `json:"stream"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

type oaiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text returns a message's text whether its content is a string or a list
// of parts.
func (m *oaiMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

func (o *oaiRequest) prompt() string {
	var parts []string
	for i := range o.Messages {
		if t := o.Messages[i].text(); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

func (o *oaiRequest) wantsJSON() bool {
	return o.ResponseFormat != nil &&
		(o.ResponseFormat.Type == "json_object" || o.ResponseFormat.Type == "json_schema")
}

type oaiResponse struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Choices []oaiChoice `json:"choices"`
	Usage   oaiUsage    `json:"usage"`
}

type oaiChoice struct {
	Index        int           `json:"index"`
	Message      oaiOutMessage `json:"message"`
	FinishReason *string       `json:"finish_reason"`
}

type oaiOutMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
}

type oaiUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}
