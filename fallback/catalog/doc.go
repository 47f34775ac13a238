// Package catalog keeps the list of models an API serves now, for a
// chain's preflight (fallback.Config.Catalog): a tier whose model is not
// in the list, or answered 404 since the last refresh, is skipped without
// an upstream call. The gemini module feeds one from models.list.
package catalog
