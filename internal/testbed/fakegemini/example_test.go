package fakegemini_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

// A primary model that is overloaded for its first request and a model
// that was retired.
func Example() {
	srv := fakegemini.New(fakegemini.WithSeed(1), fakegemini.WithRetired("gemini-1.5-pro"))
	defer srv.Close()
	srv.SetScript("gemini-2.5-pro", fakegemini.Script{
		Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always, FirstN: 1}},
		Reply: fakegemini.Text("Rayleigh scattering."),
	})

	call := func(model string) {
		body := `{"contents":[{"role":"user","parts":[{"text":"Why is the sky blue?"}]}]}`
		resp, err := srv.Client().Post(srv.URL()+"/v1beta/models/"+model+":generateContent", "application/json", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			Candidates []struct {
				Content struct {
					Parts []struct{ Text string }
				}
			}
			Error struct{ Status, Message string }
		}
		_ = json.Unmarshal(b, &out)
		if resp.StatusCode != 200 {
			fmt.Println(model, resp.StatusCode, out.Error.Status)
			return
		}
		fmt.Println(model, resp.StatusCode, out.Candidates[0].Content.Parts[0].Text)
	}
	call("gemini-2.5-pro")
	call("gemini-2.5-pro")
	call("gemini-1.5-pro")
	fmt.Println("503s:", srv.Count("gemini-2.5-pro", fakegemini.Unavailable),
		"successes:", srv.Count("gemini-2.5-pro", fakegemini.Success))

	// Output:
	// gemini-2.5-pro 503 UNAVAILABLE
	// gemini-2.5-pro 200 Rayleigh scattering.
	// gemini-1.5-pro 404 NOT_FOUND
	// 503s: 1 successes: 1
}

// The same error bodies are available without a server, for table tests.
func ExampleErrorResponse() {
	status, header, body := fakegemini.ErrorResponse(fakegemini.QuotaExhausted, fakegemini.Params{Model: "gemini-2.5-pro"})
	var e struct {
		Error struct {
			Details []map[string]any
		}
	}
	_ = json.Unmarshal(body, &e)
	fmt.Println(status, header.Get("Content-Type"))
	for _, d := range e.Error.Details {
		switch d["@type"] {
		case "type.googleapis.com/google.rpc.QuotaFailure":
			v := d["violations"].([]any)[0].(map[string]any)
			fmt.Println(v["quotaId"])
		case "type.googleapis.com/google.rpc.RetryInfo":
			fmt.Println(d["retryDelay"])
		}
	}
	// Output:
	// 429 application/json; charset=UTF-8
	// GenerateRequestsPerDayPerProjectPerModel-FreeTier
	// 37s
}
