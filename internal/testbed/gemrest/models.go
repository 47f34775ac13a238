package gemrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tierguard/tierguard/classify"
)

// maxListPages bounds how many pages ListModels follows: a server that
// hands out tokens forever cannot keep a refresh running.
const maxListPages = 100

// ListModels returns the ids ("gemini-2.5-pro", without "models/") of the
// models that support generateContent, following nextPageToken. Its
// signature is that of catalog.New's fetch function:
//
//	catalog, err := catalog.New(client.ListModels, catalog.Options{})
//
// Any Client of the API will do; the Client's own model plays no part.
// Errors classify as for Call; a page that is not a model list is an error,
// and so is a token repeated or more than 100 pages, so a refresh never
// returns a partial list as if it were whole.
func (c *Client) ListModels(ctx context.Context) ([]string, error) {
	const op = "gemrest: models.list"
	var ids []string
	seen := map[string]bool{}
	token := ""
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("%s: more than %d pages", op, maxListPages)
		}
		u := c.listURL + "?pageSize=1000"
		if token != "" {
			u += "&pageToken=" + url.QueryEscape(token)
		}
		list, err := c.listPage(ctx, op, u)
		if err != nil {
			return nil, err
		}
		for _, m := range list.Models {
			id := strings.TrimPrefix(m.Name, "models/")
			if id != "" && slices.Contains(m.SupportedGenerationMethods, "generateContent") {
				ids = append(ids, id)
			}
		}
		token = list.NextPageToken
		if token == "" {
			return ids, nil
		}
		if seen[token] {
			return nil, fmt.Errorf("%s: page token repeated", op)
		}
		seen[token] = true
	}
}

func (c *Client) listPage(ctx context.Context, op, u string) (*wireModelList, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	c.auth(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		he := classify.ReadResponse(ctx, resp)
		return nil, fmt.Errorf("%s: %w", op, he)
	}
	raw, err := c.readBody(resp.Body)
	if err != nil {
		return nil, err
	}
	var list wireModelList
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, classify.Wrap(errors.New(op+": malformed model list"),
			classify.Verdict{Class: classify.Transient, HTTPStatus: http.StatusOK, Reason: "malformed response body"})
	}
	return &list, nil
}
