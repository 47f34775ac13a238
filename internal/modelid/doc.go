// Package modelid normalises model ids, so that the price table, the
// tenant limits and the metrics of the spend ledger name a model one way
// whatever spelling a tier, a configuration file or an SDK used.
//
// # The rule
//
// Normalize applies, in order:
//
//  1. surrounding white space is removed (as strings.TrimSpace does);
//  2. letters are lower-cased (as strings.ToLower does): model ids are
//     case-insensitive at every provider tierguard talks to;
//  3. a resource path is cut to what follows its last "models/" segment:
//     "models/gemini-2.5-pro", "publishers/google/models/gemini-2.5-pro"
//     and "projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro"
//     all become "gemini-2.5-pro". A segment is "models/" at the start of
//     the id or after a "/": "tunedModels/x" is a model of its own and
//     stays "tunedmodels/x";
//  4. steps 1 and 3 are repeated until nothing changes (white space left
//     at either end by the cut goes, and so does a path inside a path).
//
// Nothing else changes. In particular a version suffix ("-001",
// "@20250514", "-preview-05-20") is part of the id: providers price
// versions apart, and guessing that two versions cost the same would
// price one of them wrongly. A price table covers the versions of a model
// with a prefix entry ("gemini-2.5-flash-*").
//
// Normalize is idempotent and allocates nothing for an id that is
// already normal.
package modelid
