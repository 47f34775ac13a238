// Stand-ins for README.md's riverjob snippet.
package snippet

import (
	"context"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/riverjob"
	"github.com/tierguard/tierguard/fallback/spend"
)

//snippets:import sqlite github.com/tierguard/tierguard/fallback/riverjob/sqlite

var ctx = context.Background()

// The reader's job input and result.
type (
	Contract struct{ Text string }
	Invoice  struct{ Total string }
)

var (
	chain     *fallback.Chain[Contract, Invoice]
	results   riverjob.Store[Invoice]
	perTenant *bulkhead.Group
	ledger    *spend.Ledger
	t, docID  string
	c         Contract
)

// The reader's job kind.
type ExtractArgs struct{ riverjob.Args[Contract] }

func (ExtractArgs) Kind() string { return "extract_contract" }
