package main

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tierguard/tierguard/internal/testbed/gemrest"
)

// resultStore is where validated invoices go: a table in the queue's own
// database, so that every worker process sees the same results.
type resultStore interface {
	Has(ctx context.Context, key string) (bool, error)
	Put(ctx context.Context, key string, out gemrest.Response) error
	// reset creates the table, empty.
	reset(ctx context.Context) error
	// keys returns every stored key with the number of times it was
	// written (more than once would mean a job ran to completion twice).
	keys(ctx context.Context) (map[string]int, error)
}

// sqliteStore keeps results in the SQLite database River uses.
type sqliteStore struct{ db *sql.DB }

func (s sqliteStore) reset(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `DROP TABLE IF EXISTS invoices; CREATE TABLE invoices (key TEXT PRIMARY KEY, answer TEXT NOT NULL, writes INTEGER NOT NULL DEFAULT 1)`)
	return err
}

func (s sqliteStore) Has(ctx context.Context, key string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM invoices WHERE key = ?`, key).Scan(&n)
	return n > 0, err
}

func (s sqliteStore) Put(ctx context.Context, key string, out gemrest.Response) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO invoices (key, answer) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET writes = writes + 1`, key, out.Text)
	return err
}

func (s sqliteStore) keys(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key, writes FROM invoices`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}

// pgStore keeps results in the PostgreSQL database River uses.
type pgStore struct{ pool *pgxpool.Pool }

func (s pgStore) reset(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `DROP TABLE IF EXISTS tierguard_batch_invoices; CREATE TABLE tierguard_batch_invoices (key text PRIMARY KEY, answer text NOT NULL, writes int NOT NULL DEFAULT 1)`)
	return err
}

func (s pgStore) Has(ctx context.Context, key string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tierguard_batch_invoices WHERE key = $1)`, key).Scan(&ok)
	return ok, err
}

func (s pgStore) Put(ctx context.Context, key string, out gemrest.Response) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO tierguard_batch_invoices (key, answer) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET writes = tierguard_batch_invoices.writes + 1`, key, out.Text)
	return err
}

func (s pgStore) keys(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT key, writes FROM tierguard_batch_invoices`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}
