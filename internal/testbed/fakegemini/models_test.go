package fakegemini_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

type modelResource struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	InputTokenLimit            int      `json:"inputTokenLimit"`
	OutputTokenLimit           int      `json:"outputTokenLimit"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

type modelList struct {
	Models        []modelResource `json:"models"`
	NextPageToken string          `json:"nextPageToken"`
}

func TestListModelsPaging(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithModels(
		fakegemini.Model{ID: "a", DisplayName: "A", InputTokenLimit: 100, OutputTokenLimit: 10},
		fakegemini.Model{ID: "b"},
		fakegemini.Model{ID: "c"},
		fakegemini.Model{ID: "d"},
		fakegemini.Model{ID: "e", Methods: []string{"embedContent"}},
	), fakegemini.WithRetired("c"))
	defer srv.Close()

	var names []string
	token := ""
	pages := 0
	for {
		q := url.Values{"pageSize": {"2"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		r := do(t, srv, http.MethodGet, "/v1beta/models?"+q.Encode(), "")
		require.Equal(t, http.StatusOK, r.status)
		page := decode[modelList](t, r.body)
		assert.LessOrEqual(t, len(page.Models), 2)
		for _, m := range page.Models {
			names = append(names, m.Name)
		}
		pages++
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	assert.Equal(t, []string{"models/a", "models/b", "models/d", "models/e"}, names)
	assert.Equal(t, 2, pages)

	all := decode[modelList](t, do(t, srv, http.MethodGet, "/v1/models", "").body)
	require.Len(t, all.Models, 4)
	assert.Empty(t, all.NextPageToken)
	a := all.Models[0]
	assert.Equal(t, modelResource{
		Name: "models/a", Version: "001", DisplayName: "A", InputTokenLimit: 100, OutputTokenLimit: 10,
		SupportedGenerationMethods: []string{"generateContent", "countTokens"},
	}, a)
	assert.Equal(t, []string{"embedContent"}, all.Models[3].SupportedGenerationMethods)

	srv.Revive("c")
	assert.Len(t, decode[modelList](t, do(t, srv, http.MethodGet, "/v1beta/models", "").body).Models, 5)

	r := do(t, srv, http.MethodGet, "/v1beta/models?pageToken=garbage", "")
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, "INVALID_ARGUMENT", decode[apiError](t, r.body).Error.Status)
	assert.Equal(t, http.StatusBadRequest, do(t, srv, http.MethodGet, "/v1beta/models?pageSize=x", "").status)

	// Listing is not a generation request.
	assert.Empty(t, srv.Stats())
}

func TestDefaultCatalog(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	list := decode[modelList](t, do(t, srv, http.MethodGet, "/v1beta/models", "").body)
	require.Len(t, list.Models, len(fakegemini.DefaultModels()))
	assert.Equal(t, "models/gemini-2.5-pro", list.Models[0].Name)
	assert.Equal(t, 1048576, list.Models[0].InputTokenLimit)
}

func TestGetModel(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithRetired("gemini-2.0-flash"))
	defer srv.Close()

	r := do(t, srv, http.MethodGet, "/v1beta/models/gemini-2.5-flash", "")
	require.Equal(t, http.StatusOK, r.status)
	m := decode[modelResource](t, r.body)
	assert.Equal(t, "models/gemini-2.5-flash", m.Name)
	assert.Equal(t, "Gemini 2.5 Flash", m.DisplayName)

	for _, id := range []string{"gemini-2.0-flash", "unknown-model"} {
		r := do(t, srv, http.MethodGet, "/v1beta/models/"+id, "")
		require.Equal(t, http.StatusNotFound, r.status)
		e := decode[apiError](t, r.body)
		assert.Equal(t, "NOT_FOUND", e.Error.Status)
		assert.Equal(t, "Model is not found: models/"+id+" for api version v1beta", e.Error.Message)
	}
}
