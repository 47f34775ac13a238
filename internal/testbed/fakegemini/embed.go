package fakegemini

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"unicode"
)

// EmbeddingDims is the size of the fake's embeddings when the request
// names no outputDimensionality: gemini-embedding-001's.
const EmbeddingDims = 3072

// The embedding endpoints' wire shapes, as https://ai.google.dev/api/embeddings
// documents them:
//
//	POST /v1beta/models/{model}:embedContent
//	{"content": {"parts": [{"text": "..."}]}, "taskType": "...", "outputDimensionality": 768}
//	→ {"embedding": {"values": [0.1, ...]}}
//
//	POST /v1beta/models/{model}:batchEmbedContents
//	{"requests": [{"model": "models/{model}", "content": {...}, "taskType": "...", "outputDimensionality": 768}]}
//	→ {"embeddings": [{"values": [0.1, ...]}]}
//
// and, for the OpenAI-compatible endpoint,
// https://platform.openai.com/docs/api-reference/embeddings/create:
//
//	POST /v1/embeddings
//	{"model": "...", "input": "..." or ["...", ...], "encoding_format": "float", "dimensions": 768}
//	→ {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [...]}],
//	   "model": "...", "usage": {"prompt_tokens": 5, "total_tokens": 5}}
type gemEmbedRequest struct {
	Model                string      `json:"model"`
	Content              *gemContent `json:"content"`
	TaskType             string      `json:"taskType"`
	Title                string      `json:"title"`
	OutputDimensionality int         `json:"outputDimensionality"`
}

type gemBatchEmbedRequest struct {
	Requests []gemEmbedRequest `json:"requests"`
}

type gemEmbedding struct {
	Values []float32 `json:"values"`
}

type oaiEmbedRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     int             `json:"dimensions"`
}

type oaiEmbedding struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

type oaiEmbedResponse struct {
	Object string         `json:"object"`
	Data   []oaiEmbedding `json:"data"`
	Model  string         `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// Embed is the fake's embedding of text with dims dimensions (0 means
// EmbeddingDims): a deterministic sum of one pseudo-random vector per word
// (case and punctuation ignored), scaled to unit length at EmbeddingDims
// and then cut to dims, as the real API truncates. Texts that share most
// of their words get close embeddings; the same text always gets the same
// one.
func Embed(text string, dims int) []float32 {
	if dims <= 0 || dims > EmbeddingDims {
		dims = EmbeddingDims
	}
	v := make([]float64, EmbeddingDims)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, w := range words {
		h := fnv.New64a()
		_, _ = h.Write([]byte(w))
		r := rand.New(rand.NewPCG(h.Sum64(), 0x5EED))
		for i := range v {
			v[i] += r.NormFloat64()
		}
	}
	var ss float64
	for _, x := range v {
		ss += x * x
	}
	out := make([]float32, dims)
	if ss == 0 {
		out[0] = 1
		return out
	}
	inv := 1 / math.Sqrt(ss)
	for i := range out {
		out[i] = float32(v[i] * inv)
	}
	return out
}

func (s *Server) serveEmbed(w http.ResponseWriter, r *http.Request, version, model string, batch bool) {
	method := "embedContent"
	if batch {
		method = "batchEmbedContents"
	}
	c := &call{srv: s, model: model, version: version, method: method}
	var reqs []gemEmbedRequest
	var parseErr error
	if batch {
		var b gemBatchEmbedRequest
		if parseErr = readJSON(r, &b); parseErr == nil && len(b.Requests) == 0 {
			parseErr = badRequest("* BatchEmbedContentsRequest.requests: requests is not specified\n")
		}
		reqs = b.Requests
	} else {
		var one gemEmbedRequest
		parseErr = readJSON(r, &one)
		reqs = []gemEmbedRequest{one}
	}
	var texts []string
	for _, q := range reqs {
		if parseErr == nil && (q.Content == nil || len(q.Content.Parts) == 0) {
			parseErr = badRequest("* EmbedContentRequest.content: content is not specified\n")
		}
		if q.Content != nil {
			var parts []string
			for _, p := range q.Content.Parts {
				parts = append(parts, p.Text)
			}
			texts = append(texts, strings.Join(parts, "\n"))
		}
	}
	c.req = Request{Model: model, Prompt: strings.Join(texts, "\n")}
	s.begin(c)
	c.outcome = Canceled
	defer c.finish()
	s.decide(c, r, parseErr)
	if !s.hold(w, r, c) {
		return
	}
	c.outcome = c.kind
	switch {
	case c.kind == Drop:
		c.finish()
		abort(w, false)
		return
	case c.kind.isError():
		s.writeError(w, c)
		return
	}
	// A fault shaped as a 200 (an empty or malformed answer) has no
	// embedding form: the embedding endpoints answer it normally.
	c.outcome = Success
	embs := make([]gemEmbedding, len(reqs))
	for i, q := range reqs {
		embs[i] = gemEmbedding{Values: Embed(texts[i], q.OutputDimensionality)}
	}
	c.finish()
	if batch {
		writeJSON(w, struct {
			Embeddings []gemEmbedding `json:"embeddings"`
		}{embs})
		return
	}
	writeJSON(w, struct {
		Embedding gemEmbedding `json:"embedding"`
	}{embs[0]})
}

func (s *Server) serveOpenAIEmbed(w http.ResponseWriter, r *http.Request) {
	var o oaiEmbedRequest
	parseErr := readJSON(r, &o)
	var texts []string
	if parseErr == nil {
		var one string
		if err := json.Unmarshal(o.Input, &one); err == nil {
			texts = []string{one}
		} else if err := json.Unmarshal(o.Input, &texts); err != nil || len(texts) == 0 {
			parseErr = badRequest("'input' must be a string or a non-empty array of strings")
		}
	}
	switch {
	case parseErr != nil:
	case o.Model == "":
		parseErr = badRequest("you must provide a model parameter")
	case o.EncodingFormat != "" && o.EncodingFormat != "float":
		parseErr = badRequest("fakegemini: only encoding_format float is supported")
	}
	model := strings.TrimPrefix(o.Model, "models/")
	c := &call{srv: s, model: model, version: "v1beta", method: "embedContent", openai: true}
	c.req = Request{Model: model, Prompt: strings.Join(texts, "\n"), OpenAI: true}
	s.begin(c)
	c.outcome = Canceled
	defer c.finish()
	s.decide(c, r, parseErr)
	if !s.hold(w, r, c) {
		return
	}
	c.outcome = c.kind
	switch {
	case c.kind == Drop:
		c.finish()
		abort(w, false)
		return
	case c.kind.isError():
		s.writeError(w, c)
		return
	}
	c.outcome = Success
	resp := oaiEmbedResponse{Object: "list", Model: model}
	for i, t := range texts {
		// OpenAI scales a shortened embedding back to unit length.
		resp.Data = append(resp.Data, oaiEmbedding{Object: "embedding", Index: i, Embedding: unitLength(Embed(t, o.Dimensions))})
		resp.Usage.PromptTokens += max(1, estimateTokens(t))
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	c.finish()
	b, _ := json.Marshal(resp)
	writeBody(w, http.StatusOK, http.Header{"Content-Type": {"application/json"}}, append(b, '\n'))
}

func unitLength(v []float32) []float32 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	inv := 1 / math.Sqrt(ss)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
	return v
}
