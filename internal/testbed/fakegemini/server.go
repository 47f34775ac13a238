package fakegemini

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Model is one entry of the fake's model catalog.
type Model struct {
	// ID is the model id without "models/", e.g. "gemini-2.5-pro".
	ID string
	// DisplayName is shown in the list; default ID.
	DisplayName string
	// InputTokenLimit is the context window. A request whose estimated
	// prompt tokens (runes/4) exceed it gets a TokenLimit error. Zero means
	// no limit (and 1048576 in the listing).
	InputTokenLimit int
	// OutputTokenLimit is listed as is (default 65536).
	OutputTokenLimit int
	// Methods are the supportedGenerationMethods (default generateContent,
	// countTokens).
	Methods []string
}

// DefaultModels returns the catalog a server starts with: gemini-2.5-pro,
// gemini-2.5-flash, gemini-2.5-flash-lite and gemini-2.0-flash, each with a
// 1,048,576-token input window.
func DefaultModels() []Model {
	return []Model{
		{ID: "gemini-2.5-pro", DisplayName: "Gemini 2.5 Pro", InputTokenLimit: 1048576, OutputTokenLimit: 65536},
		{ID: "gemini-2.5-flash", DisplayName: "Gemini 2.5 Flash", InputTokenLimit: 1048576, OutputTokenLimit: 65536},
		{ID: "gemini-2.5-flash-lite", DisplayName: "Gemini 2.5 Flash-Lite", InputTokenLimit: 1048576, OutputTokenLimit: 65536},
		{ID: "gemini-2.0-flash", DisplayName: "Gemini 2.0 Flash", InputTokenLimit: 1048576, OutputTokenLimit: 8192},
	}
}

// Option configures a [Server] at construction.
type Option func(*Server)

// WithSeed seeds the random draws (rule probabilities, latency jitter).
// The default seed is 0: runs are reproducible even without this option.
func WithSeed(seed uint64) Option { return func(s *Server) { s.seed = seed } }

// WithNow sets the clock that rule windows and the OpenAI "created" field
// read; default time.Now. It is called concurrently.
func WithNow(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithModels replaces the model catalog (default [DefaultModels]). The
// catalog is what GET /v1beta/models lists, minus retired models.
func WithModels(models ...Model) Option {
	return func(s *Server) { s.catalog = slices.Clone(models) }
}

// WithRetired retires model ids from the start, as [Server.Retire] does.
func WithRetired(ids ...string) Option {
	return func(s *Server) {
		for _, id := range ids {
			s.retired[id] = true
		}
	}
}

// WithStrictModels makes model ids that are not in the catalog answer 404
// NOT_FOUND like retired ones. By default any model id is served with the
// default script.
func WithStrictModels() Option { return func(s *Server) { s.strict = true } }

// WithAPIKeys turns on key checks: a request with a key outside keys gets
// 400 INVALID_ARGUMENT API_KEY_INVALID (401 invalid_api_key on the OpenAI
// endpoint), one without a key 403 PERMISSION_DENIED (401 on the OpenAI
// endpoint). Without this option keys are not checked.
func WithAPIKeys(keys ...string) Option {
	return func(s *Server) {
		s.keys = make(map[string]bool, len(keys))
		for _, k := range keys {
			s.keys[k] = true
		}
	}
}

// Server is a running fake. Its methods may be called concurrently, also
// while requests are in flight.
type Server struct {
	ts        *httptest.Server
	transport *http.Transport
	client    *http.Client
	seed      uint64
	now       func() time.Time
	strict    bool
	keys      map[string]bool
	quotas    quotaTable
	done      chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	catalog   []Model
	retired   map[string]bool
	scripts   map[string]Script
	defScript Script
	seq       map[string]int64
	stats     map[string]*ModelStats
	keyStats  map[string]*ModelStats
	inFlight  int64
	byID      map[string]Model
}

// New starts a fake server on a loopback port.
func New(opts ...Option) *Server {
	s := &Server{
		now:      time.Now,
		done:     make(chan struct{}),
		catalog:  DefaultModels(),
		retired:  map[string]bool{},
		scripts:  map[string]Script{},
		seq:      map[string]int64{},
		stats:    map[string]*ModelStats{},
		keyStats: map[string]*ModelStats{},
	}
	for _, o := range opts {
		o(s)
	}
	s.indexCatalog()
	s.ts = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     90 * time.Second,
	}
	s.client = &http.Client{Transport: s.transport}
	return s
}

func (s *Server) indexCatalog() {
	s.byID = make(map[string]Model, len(s.catalog))
	for _, m := range s.catalog {
		s.byID[m.ID] = m
	}
}

// URL is the base URL, without a trailing slash. Gemini paths hang below
// it (URL()+"/v1beta/models/..."); it is the BaseURL for
// google.golang.org/genai.
func (s *Server) URL() string { return s.ts.URL }

// OpenAIURL is the base URL of the OpenAI-compatible endpoint,
// URL()+"/v1", to give to openai-go's option.WithBaseURL.
func (s *Server) OpenAIURL() string { return s.ts.URL + "/v1" }

// Client returns an HTTP client for the server, with keep-alive and enough
// idle connections per host for parallel benchmarks. Close closes its idle
// connections.
func (s *Server) Client() *http.Client { return s.client }

// Close stops the server. Requests still held (stalls, latencies, streams)
// are cut at once and counted as Canceled; Close does not wait for them to
// run their course. It is safe to call Close more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.ts.CloseClientConnections()
		s.ts.Close()
		s.transport.CloseIdleConnections()
	})
}

// SetScript gives model its own script, replacing any previous one, and
// restarts its request numbering (for Rule.FirstN and Rule.Every). It
// panics if sc.Validate fails.
func (s *Server) SetScript(model string, sc Script) {
	if err := sc.Validate(); err != nil {
		panic("fakegemini: invalid script for " + model + ": " + err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[model] = sc.clone()
	delete(s.seq, model)
}

// ClearScript puts model back on the default script and restarts its
// request numbering.
func (s *Server) ClearScript(model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.scripts, model)
	delete(s.seq, model)
}

// SetDefaultScript sets the script of every model without its own script
// (initially the zero Script: instant success) and restarts their request
// numbering. It panics if sc.Validate fails.
func (s *Server) SetDefaultScript(sc Script) {
	if err := sc.Validate(); err != nil {
		panic("fakegemini: invalid default script: " + err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defScript = sc.clone()
	for m := range s.seq {
		if _, own := s.scripts[m]; !own {
			delete(s.seq, m)
		}
	}
}

// Retire makes model answer 404 NOT_FOUND to generation and GET requests
// and drops it from the model list, whatever its script says.
func (s *Server) Retire(model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retired[model] = true
}

// Revive undoes Retire.
func (s *Server) Revive(model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.retired, model)
}

// ModelStats counts the generation requests (generateContent,
// streamGenerateContent, chat completions) of one model. Model list and get
// requests are not counted.
type ModelStats struct {
	// Requests is how many requests arrived.
	Requests int64
	// InFlight is how many are being handled now.
	InFlight int64
	// Outcomes counts finished requests by how they ended.
	Outcomes map[Kind]int64
}

// Stats returns a snapshot of the counters, by model id. Requests whose
// body could not be parsed to find a model are counted under "".
func (s *Server) Stats() map[string]ModelStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]ModelStats, len(s.stats))
	for m, st := range s.stats {
		out[m] = ModelStats{Requests: st.Requests, InFlight: st.InFlight, Outcomes: maps.Clone(st.Outcomes)}
	}
	return out
}

// Count returns how many requests to model ended as k.
func (s *Server) Count(model string, k Kind) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.stats[model]; st != nil {
		return st.Outcomes[k]
	}
	return 0
}

// Requests returns how many requests to model arrived.
func (s *Server) Requests(model string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.stats[model]; st != nil {
		return st.Requests
	}
	return 0
}

// KeyRequests returns how many generation requests made with key arrived,
// every model together: what a provider rate-limits and bills that key
// for. Requests without a key are counted under "".
func (s *Server) KeyRequests(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.keyStats[key]; st != nil {
		return st.Requests
	}
	return 0
}

// KeyCount returns how many generation requests made with key, every
// model together, ended as k.
func (s *Server) KeyCount(key string, k Kind) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.keyStats[key]; st != nil {
		return st.Outcomes[k]
	}
	return 0
}

// InFlight returns how many generation requests, to all models, are being
// handled now.
func (s *Server) InFlight() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// ResetStats zeroes the request and outcome counters (in-flight gauges and
// request numbering are kept).
func (s *Server) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for m, st := range s.stats {
		s.stats[m] = &ModelStats{InFlight: st.InFlight, Outcomes: map[Kind]int64{}}
	}
	for k, st := range s.keyStats {
		s.keyStats[k] = &ModelStats{InFlight: st.InFlight, Outcomes: map[Kind]int64{}}
	}
}

// call is one generation request on its way through the server.
type call struct {
	model   string
	key     string // the API key the request came with, "" for none
	version string // "v1beta" or "v1"
	method  string // "generateContent" or "StreamGenerateContent"
	openai  bool
	stream  bool
	sse     bool
	req     Request
	n       int64
	script  Script
	rng     *rand.Rand
	kind    Kind
	params  Params
	outcome Kind

	srv      *Server
	finished bool
}

// begin numbers the request and takes a snapshot of its script.
func (s *Server) begin(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, own := s.scripts[c.model]
	if !own {
		sc = s.defScript
	}
	s.seq[c.model]++
	c.n = s.seq[c.model]
	c.req.N = c.n
	c.script = sc
	st := s.stats[c.model]
	if st == nil {
		st = &ModelStats{Outcomes: map[Kind]int64{}}
		s.stats[c.model] = st
	}
	st.Requests++
	st.InFlight++
	s.inFlight++
	ks := s.keyStats[c.key]
	if ks == nil {
		ks = &ModelStats{Outcomes: map[Kind]int64{}}
		s.keyStats[c.key] = ks
	}
	ks.Requests++
	ks.InFlight++
	h := fnv.New64a()
	_, _ = io.WriteString(h, c.model)
	c.rng = rand.New(rand.NewPCG(s.seed, h.Sum64()^(uint64(c.n)*0x9E3779B97F4A7C15)))
}

// finish counts the request's outcome and takes it out of flight. It runs
// before the last byte goes out, so that a client that has seen the answer
// also sees it counted; later calls do nothing.
func (c *call) finish() {
	if c.finished {
		return
	}
	c.finished = true
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats[c.model]
	st.InFlight--
	s.inFlight--
	st.Outcomes[c.outcome]++
	ks := s.keyStats[c.key]
	ks.InFlight--
	ks.Outcomes[c.outcome]++
}

func (s *Server) isRetired(model string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired[model] {
		return true
	}
	_, known := s.byID[model]
	return s.strict && !known
}

func (s *Server) catalogModel(model string) (Model, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.byID[model]
	return m, ok
}

// apiKey finds the key wherever a client may put it.
func apiKey(r *http.Request) string {
	if k := r.Header.Get("x-goog-api-key"); k != "" {
		return k
	}
	if k := r.URL.Query().Get("key"); k != "" {
		return k
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// checkKey returns the auth fault for r, if keys are checked.
func (s *Server) checkKey(r *http.Request, openai bool) (Kind, Params, bool) {
	if s.keys == nil {
		return "", Params{}, false
	}
	k := apiKey(r)
	switch {
	case k == "" && openai:
		return Unauthenticated, Params{}, true
	case k == "":
		return PermissionDenied, Params{Message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}, true
	case !s.keys[k]:
		return InvalidAPIKey, Params{}, true
	}
	return "", Params{}, false
}

var errClosing = errors.New("fakegemini: server closing")

// wait sleeps d (forever when d < 0) unless the request or the server
// ends first.
func (s *Server) wait(ctx context.Context, d time.Duration) error {
	if d == 0 {
		return ctx.Err()
	}
	var tc <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-tc:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return errClosing
	}
}

// abort drops the connection without finishing the response. flush sends
// what was written so far first; it must be false when nothing was written,
// or it would send a 200 header.
func abort(w http.ResponseWriter, flush bool) {
	rc := http.NewResponseController(w)
	if flush {
		_ = rc.Flush()
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case path == "/v1/chat/completions" || path == "/v1beta/openai/chat/completions":
		if r.Method != http.MethodPost {
			s.routeError(w, r)
			return
		}
		s.serveOpenAI(w, r)
		return
	case (path == "/v1/embeddings" || path == "/v1beta/openai/embeddings") && r.Method == http.MethodPost:
		s.serveOpenAIEmbed(w, r)
		return
	}
	version, rest, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || (version != "v1beta" && version != "v1") {
		s.routeError(w, r)
		return
	}
	switch {
	case rest == "models" && r.Method == http.MethodGet:
		s.serveList(w, r)
	case strings.HasPrefix(rest, "models/"):
		name := strings.TrimPrefix(rest, "models/")
		model, method, hasMethod := strings.Cut(name, ":")
		switch {
		case !hasMethod && r.Method == http.MethodGet:
			s.serveGet(w, r, version, model)
		case hasMethod && r.Method == http.MethodPost && method == "generateContent":
			s.serveGenerate(w, r, version, model, false)
		case hasMethod && r.Method == http.MethodPost && method == "streamGenerateContent":
			s.serveGenerate(w, r, version, model, true)
		case hasMethod && r.Method == http.MethodPost && (method == "embedContent" || method == "batchEmbedContents"):
			s.serveEmbed(w, r, version, model, method == "batchEmbedContents")
		default:
			s.routeError(w, r)
		}
	default:
		s.routeError(w, r)
	}
}

func (s *Server) routeError(w http.ResponseWriter, r *http.Request) {
	writeJSONError(w, http.StatusNotFound, gemErrorBody{
		Code: http.StatusNotFound, Status: "NOT_FOUND",
		Message: "Method not found: " + r.Method + " " + r.URL.Path,
	})
}

func writeJSONError(w http.ResponseWriter, status int, e gemErrorBody) {
	b, _ := json.MarshalIndent(gemError{Error: e}, "", "  ")
	b = append(b, '\n')
	writeBody(w, status, http.Header{"Content-Type": {jsonContentType}}, b)
}

func writeBody(w http.ResponseWriter, status int, h http.Header, body []byte) {
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Server) authFailed(w http.ResponseWriter, r *http.Request) bool {
	k, p, bad := s.checkKey(r, false)
	if !bad {
		return false
	}
	var buf strings.Builder
	status, h := writeGemError(&buf, k, p)
	writeBody(w, status, h, []byte(buf.String()))
	return true
}

func (s *Server) modelResource(m Model) gemModel {
	name := m.DisplayName
	if name == "" {
		name = m.ID
	}
	methods := m.Methods
	if len(methods) == 0 {
		methods = []string{"generateContent", "countTokens"}
	}
	in := m.InputTokenLimit
	if in <= 0 {
		in = DefaultTokenLimit
	}
	out := m.OutputTokenLimit
	if out <= 0 {
		out = 65536
	}
	return gemModel{
		Name: "models/" + m.ID, Version: "001", DisplayName: name, Description: name + " (fakegemini)",
		InputTokenLimit: in, OutputTokenLimit: out, SupportedGenerationMethods: methods,
		Temperature: 1, TopP: 0.95, TopK: 64, MaxTemperature: 2,
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	b = append(b, '\n')
	writeBody(w, http.StatusOK, http.Header{"Content-Type": {jsonContentType}}, b)
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request) {
	if s.authFailed(w, r) {
		return
	}
	q := r.URL.Query()
	size := 50
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSONError(w, http.StatusBadRequest, gemErrorBody{Code: 400, Status: "INVALID_ARGUMENT",
				Message: "Invalid value at 'page_size' (TYPE_INT32), \"" + v + "\""})
			return
		}
		if n > 0 {
			size = min(n, 1000)
		}
	}
	offset := 0
	if t := q.Get("pageToken"); t != "" {
		raw, err := base64.RawURLEncoding.DecodeString(t)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(raw), "offset:"))
		if err != nil || err2 != nil || !strings.HasPrefix(string(raw), "offset:") || n < 0 {
			writeJSONError(w, http.StatusBadRequest, gemErrorBody{Code: 400, Status: "INVALID_ARGUMENT", Message: "Invalid page token."})
			return
		}
		offset = n
	}
	s.mu.Lock()
	var live []Model
	for _, m := range s.catalog {
		if !s.retired[m.ID] {
			live = append(live, m)
		}
	}
	s.mu.Unlock()
	resp := gemModelList{Models: []gemModel{}}
	if offset < len(live) {
		end := min(offset+size, len(live))
		for _, m := range live[offset:end] {
			resp.Models = append(resp.Models, s.modelResource(m))
		}
		if end < len(live) {
			resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(end)))
		}
	}
	writeJSON(w, resp)
}

func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, version, model string) {
	if s.authFailed(w, r) {
		return
	}
	m, known := s.catalogModel(model)
	if s.isRetired(model) || !known {
		writeJSONError(w, http.StatusNotFound, gemErrorBody{Code: 404, Status: "NOT_FOUND",
			Message: "Model is not found: models/" + model + " for api version " + version})
		return
	}
	writeJSON(w, s.modelResource(m))
}

// estimateTokens is a rough token count: one token per four runes.
func estimateTokens(s string) int {
	n := len([]rune(s))
	if n == 0 {
		return 0
	}
	return (n + 3) / 4
}

// decide picks the request's fate and fills in its parameters.
func (s *Server) decide(c *call, r *http.Request, parseErr error) {
	c.kind, c.params = s.fate(c, r, parseErr)
	if c.params.Model == "" {
		c.params.Model = c.model
	}
	if c.params.APIVersion == "" {
		c.params.APIVersion = c.version
	}
	if c.params.Method == "" {
		c.params.Method = c.method
	}
	c.params = c.params.withDefaults(c.kind)
}

// fate runs the checks in the real API's order: body, key, model, context
// window; then the script's rules.
func (s *Server) fate(c *call, r *http.Request, parseErr error) (Kind, Params) {
	if parseErr != nil {
		return BadRequest, Params{Message: parseErr.Error()}
	}
	if k, p, bad := s.checkKey(r, c.openai); bad {
		return k, p
	}
	if s.isRetired(c.model) {
		return Retired, Params{}
	}
	if wait, over := s.overQuota(c.model, r); over {
		return RateLimited, Params{RetryDelay: wait}
	}
	m, _ := s.catalogModel(c.model)
	est := estimateTokens(c.req.Prompt)
	if m.InputTokenLimit > 0 && est > m.InputTokenLimit {
		return TokenLimit, Params{InputTokens: est, TokenLimit: m.InputTokenLimit}
	}
	rule, ok := c.script.pick(c.n, c.key, s.now(), c.rng)
	if !ok {
		return Success, Params{}
	}
	p := rule.Params
	if rule.Kind == TokenLimit {
		if p.TokenLimit == 0 {
			p.TokenLimit = m.InputTokenLimit
		}
		if p.TokenLimit <= 0 {
			p.TokenLimit = DefaultTokenLimit
		}
		if p.InputTokens == 0 && est > p.TokenLimit {
			p.InputTokens = est
		}
	}
	return rule.Kind, p
}

// hold waits before the answer; it reports false when the request is over.
func (s *Server) hold(w http.ResponseWriter, r *http.Request, c *call) bool {
	var d time.Duration
	switch {
	case c.kind == Stall:
		d = c.params.StallFor
		if d == 0 {
			d = -1
		}
	case c.kind.isError() || c.kind == Drop || (c.openai && c.kind == PromptBlocked):
		d = c.script.FaultLatency.draw(c.rng)
	default:
		d = c.script.Latency.draw(c.rng)
	}
	if err := s.wait(r.Context(), d); err != nil {
		c.outcome = Canceled
		c.finish()
		if errors.Is(err, errClosing) {
			abort(w, false)
		}
		return false
	}
	return true
}

func (s *Server) serveGenerate(w http.ResponseWriter, r *http.Request, version, model string, stream bool) {
	c := &call{srv: s, model: model, version: version, method: "generateContent", stream: stream}
	if stream {
		c.method = "StreamGenerateContent"
		c.sse = r.URL.Query().Get("alt") == "sse"
	}
	var g gemRequest
	parseErr := readJSON(r, &g)
	if parseErr == nil && len(g.Contents) == 0 {
		parseErr = badRequest("* GenerateContentRequest.contents: contents is not specified\n")
	}
	c.req = Request{Model: model, Prompt: g.prompt(), JSON: g.wantsJSON(), Stream: stream}
	c.key = apiKey(r)
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
	case c.kind.isError():
		s.writeError(w, c)
	case stream:
		s.writeStream(w, r, c)
	default:
		s.writeUnary(w, c)
	}
}

// badRequest is the message of a 400 answer to a request the fake cannot
// use; it carries the API's own wording, capitals and all.
type badRequest string

func (b badRequest) Error() string { return string(b) }

func readJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return badRequest("Request body could not be read: " + err.Error())
	}
	if err := json.Unmarshal(body, v); err != nil {
		return badRequest("Invalid JSON payload received. " + err.Error())
	}
	return nil
}

func (s *Server) writeError(w http.ResponseWriter, c *call) {
	h := w.Header()
	var write func(io.Writer, Kind, Params) (int, http.Header)
	write = writeGemError
	if c.openai {
		write = writeOAIError
	}
	if c.kind == HugeBody {
		// Stream it rather than buffer BodySize bytes per request.
		small := c.params
		small.BodySize = 1
		status, hdr := write(io.Discard, c.kind, small)
		for k, v := range hdr {
			h[k] = v
		}
		c.finish()
		w.WriteHeader(status)
		write(w, c.kind, c.params)
		return
	}
	var buf strings.Builder
	status, hdr := write(&buf, c.kind, c.params)
	c.finish()
	writeBody(w, status, hdr, []byte(buf.String()))
}

// answerText is the text a 200 answer carries.
func (c *call) answerText() string {
	if c.kind == MalformedJSON {
		return c.params.Text
	}
	if c.script.Reply != nil {
		return c.script.Reply(c.req)
	}
	return defaultReply(c.req)
}

func (c *call) responseID() string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", c.model, c.n)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

func (c *call) usage(answer string) *gemUsage {
	p, a := max(1, estimateTokens(c.req.Prompt)), estimateTokens(answer)
	return &gemUsage{PromptTokenCount: p, CandidatesTokenCount: a, TotalTokenCount: p + a}
}

// gemBody is the unary Gemini answer of a 200 kind.
func (c *call) gemBody() gemResponse {
	resp := gemResponse{ModelVersion: c.model, ResponseID: c.responseID()}
	switch c.kind {
	case SafetyFinish:
		resp.Candidates = []gemCandidate{{FinishReason: "SAFETY", SafetyRatings: safetyRatings(true)}}
		resp.UsageMetadata = c.usage("")
	case PromptBlocked:
		resp.PromptFeedback = &gemPromptFeedback{BlockReason: "SAFETY", SafetyRatings: safetyRatings(true)}
		resp.UsageMetadata = c.usage("")
	case EmptyCandidates:
		resp.Candidates = []gemCandidate{}
		resp.UsageMetadata = c.usage("")
	default:
		text := c.answerText()
		cand := gemCandidate{Content: &gemContent{Parts: []gemPart{{Text: text}}, Role: "model"}, FinishReason: "STOP"}
		if c.kind == NoFinishReason {
			cand.FinishReason = ""
		}
		resp.Candidates = []gemCandidate{cand}
		resp.UsageMetadata = c.usage(text)
	}
	return resp
}

func (s *Server) writeUnary(w http.ResponseWriter, c *call) {
	var body []byte
	header := http.Header{}
	if c.openai {
		if c.kind == PromptBlocked {
			var buf strings.Builder
			status, hdr := writeOAIError(&buf, c.kind, c.params)
			c.finish()
			writeBody(w, status, hdr, []byte(buf.String()))
			return
		}
		body, _ = json.Marshal(c.oaiBody(s.now()))
		body = append(body, '\n')
		header.Set("Content-Type", "application/json")
	} else {
		body, _ = json.MarshalIndent(c.gemBody(), "", "  ")
		body = append(body, '\n')
		header.Set("Content-Type", jsonContentType)
	}
	c.finish()
	if c.kind != StreamCut {
		writeBody(w, http.StatusOK, header, body)
		return
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body[:len(body)/2])
	abort(w, true)
}

func (c *call) oaiBody(now time.Time) oaiResponse {
	resp := oaiResponse{
		ID: "chatcmpl-" + c.responseID(), Object: "chat.completion", Created: now.Unix(), Model: c.model,
		Choices: []oaiChoice{},
	}
	text := ""
	switch c.kind {
	case SafetyFinish:
		resp.Choices = append(resp.Choices, oaiChoice{Message: oaiOutMessage{Role: "assistant"}, FinishReason: strp("content_filter")})
	case EmptyCandidates:
	default:
		text = c.answerText()
		ch := oaiChoice{Message: oaiOutMessage{Role: "assistant", Content: &text}, FinishReason: strp("stop")}
		if c.kind == NoFinishReason {
			ch.FinishReason = nil
		}
		resp.Choices = append(resp.Choices, ch)
	}
	u := c.usage(text)
	resp.Usage = oaiUsage{PromptTokens: u.PromptTokenCount, CompletionTokens: u.CandidatesTokenCount, TotalTokens: u.TotalTokenCount}
	return resp
}

// splitText cuts s into n pieces of nearly equal rune counts (fewer when s
// is shorter, at least one).
func splitText(s string, n int) []string {
	r := []rune(s)
	n = max(1, min(n, len(r)))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}

// streamChunks are the chunks of a stream answer, last one last.
func (c *call) streamChunks() []gemResponse {
	base := gemResponse{ModelVersion: c.model, ResponseID: c.responseID()}
	switch c.kind {
	case SafetyFinish, PromptBlocked, EmptyCandidates:
		return []gemResponse{c.gemBody()}
	}
	text := c.answerText()
	n := c.script.Chunks
	if n <= 0 {
		n = 3
	}
	if c.kind == StreamCut {
		n = max(n, c.params.CutAfter+1)
	}
	pieces := splitText(text, n)
	chunks := make([]gemResponse, len(pieces))
	for i, p := range pieces {
		ch := base
		cand := gemCandidate{Content: &gemContent{Parts: []gemPart{{Text: p}}, Role: "model"}}
		if i == len(pieces)-1 {
			if c.kind != NoFinishReason {
				cand.FinishReason = "STOP"
			}
			ch.UsageMetadata = c.usage(text)
		}
		ch.Candidates = []gemCandidate{cand}
		chunks[i] = ch
	}
	return chunks
}

func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, c *call) {
	chunks := c.streamChunks()
	cut := -1
	if c.kind == StreamCut {
		cut = min(c.params.CutAfter, len(chunks)-1)
	}
	if c.sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", jsonContentType)
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, ch := range chunks {
		if i == cut {
			c.finish()
			abort(w, true)
			return
		}
		if i > 0 {
			if err := s.wait(r.Context(), c.script.ChunkDelay); err != nil {
				c.outcome = Canceled
				c.finish()
				if errors.Is(err, errClosing) {
					abort(w, false)
				}
				return
			}
		}
		b, _ := json.Marshal(ch)
		var frame []byte
		switch {
		case c.sse && i > 0 && c.script.KeepAlive:
			frame = append([]byte(": keepalive\r\n\r\ndata: "), b...)
			frame = append(frame, "\r\n\r\n"...)
		case c.sse:
			frame = append([]byte("data: "), b...)
			frame = append(frame, "\r\n\r\n"...)
		case i == 0:
			frame = append([]byte("["), b...)
		default:
			frame = append([]byte("\n,\r\n"), b...)
		}
		if i == len(chunks)-1 {
			c.finish()
		}
		if _, err := w.Write(frame); err != nil {
			c.outcome = Canceled
			c.finish()
			return
		}
		if err := rc.Flush(); err != nil {
			c.outcome = Canceled
			c.finish()
			return
		}
	}
	if !c.sse {
		_, _ = io.WriteString(w, "\n]")
	}
}

func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	var o oaiRequest
	parseErr := readJSON(r, &o)
	if parseErr != nil {
		parseErr = badRequest("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	} else if o.Stream {
		parseErr = badRequest("fakegemini: stream=true is not supported on the chat completions endpoint")
	} else if o.Model == "" {
		parseErr = badRequest("you must provide a model parameter")
	}
	model := strings.TrimPrefix(o.Model, "models/")
	c := &call{srv: s, model: model, version: "v1beta", method: "generateContent", openai: true}
	c.req = Request{Model: model, Prompt: o.prompt(), JSON: o.wantsJSON(), OpenAI: true}
	c.key = apiKey(r)
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
	case c.kind.isError():
		s.writeError(w, c)
	default:
		s.writeUnary(w, c)
	}
}
