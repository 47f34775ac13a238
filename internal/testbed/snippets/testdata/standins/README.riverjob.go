// Stand-ins for README.md's riverjob snippet.
package snippet

import (
	"context"
	"database/sql"

	"github.com/riverqueue/river"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/riverjob"
)

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
	workers   *river.Workers
	client    *river.Client[*sql.Tx]
	t, docID  string
	c         Contract
)
