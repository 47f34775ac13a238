// Package fakegemini is an in-process fake of the Gemini REST API (and of an
// OpenAI-compatible chat endpoint) with scripted, deterministic fault
// injection. Tests, benchmarks, examples and scenario programs use it to
// drive tierguard and the real vendor SDKs against real-shaped failures.
//
// # Endpoints
//
// A [Server] answers, under both the v1beta and v1 API versions:
//
//	POST /v1beta/models/{model}:generateContent
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse
//	POST /v1beta/models/{model}:embedContent
//	POST /v1beta/models/{model}:batchEmbedContents
//	GET  /v1beta/models?pageSize=N&pageToken=T
//	GET  /v1beta/models/{model}
//	POST /v1/chat/completions                 (OpenAI shape)
//	POST /v1beta/openai/chat/completions      (same handler)
//	POST /v1/embeddings                       (OpenAI shape; also under /v1beta/openai)
//
// Embeddings are deterministic ([Embed]); a model's script applies to its
// embedding requests as to generation ones.
//
// The Gemini base URL for google.golang.org/genai is [Server.URL]; the
// OpenAI base URL for openai-go is [Server.OpenAIURL]. The API key may come
// in the x-goog-api-key header, the key query parameter or an
// "Authorization: Bearer" header; keys are only checked when [WithAPIKeys]
// is given.
//
// # Scripting faults
//
// Each model id has a [Script] (or the default script, see
// [Server.SetDefaultScript]): a latency before 200 answers, a latency before
// error answers, an ordered list of [Rule] values and options for the
// success body. For each generation request the server takes the first rule
// whose conditions hold (time window, first N requests, every Nth request,
// the API key it came with)
// and whose probability draw succeeds; if none fires the request succeeds.
// Scripts can be replaced while the server runs, so an outage can start and
// end:
//
//	srv.SetScript("gemini-2.5-pro", fakegemini.Script{
//		Latency: fakegemini.Latency{Fixed: 40 * time.Millisecond},
//		Rules:   []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: 0.06}},
//	})
//	srv.Retire("gemini-1.5-pro") // 404 NOT_FOUND, absent from the list
//
// # Determinism
//
// Random draws come from a generator seeded by ([WithSeed], model id,
// request number for that model), so the k-th request to a model meets the
// same fate in every run with the same seed, whatever the traffic to other
// models. Time windows read the clock given by [WithNow].
//
// # Counters
//
// [Server.Stats], [Server.Count], [Server.Requests] and [Server.InFlight]
// report, per model, how many generation requests arrived, how many are in
// flight and how each one ended ([Kind]); [Server.KeyRequests] and
// [Server.KeyCount] count the same per API key, every model together, as a
// provider counts a key's quota; [Server.ResetStats] clears them.
//
// # Bodies without HTTP
//
// [ErrorResponse] and [OpenAIErrorResponse] return the exact status, headers
// and body the server writes for an error kind, so that table tests in other
// packages can use real-shaped bodies without a server.
package fakegemini
