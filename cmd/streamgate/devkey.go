package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/streamgate/streamgate/internal/sqldb"
)

// devKeySchema keeps the embedded default's development key in its
// database, so that agents configured with it keep working across
// restarts. The secret is stored as it is: it is a development key of a
// gateway on loopback, printed at every start anyway.
func devKeySchema() sqldb.Schema {
	return sqldb.Schema{Component: "dev_key", Steps: [][]string{{
		`CREATE TABLE streamgate_dev_key (
			id     INTEGER PRIMARY KEY,
			secret TEXT NOT NULL
		)`,
	}}}
}

// keepDevKey returns the development key kept in the database dsn,
// storing generated there first when it keeps none; fresh reports that it
// did.
func keepDevKey(ctx context.Context, dsn, generated string) (key string, fresh bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return "", false, fmt.Errorf("development key: %w", err)
	}
	defer db.Close()
	if err := db.MigrateSchema(ctx, devKeySchema()); err != nil {
		return "", false, fmt.Errorf("development key: %w", err)
	}
	err = db.QueryRowContext(ctx, `SELECT secret FROM streamgate_dev_key WHERE id = 1`).Scan(&key)
	if err == nil {
		return key, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, fmt.Errorf("development key: read it from %s: %w", db.Name, err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO streamgate_dev_key (id, secret) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, generated); err != nil {
		return "", false, fmt.Errorf("development key: keep it in %s: %w", db.Name, err)
	}
	// Another process starting at once may have kept its own first.
	if err := db.QueryRowContext(ctx, `SELECT secret FROM streamgate_dev_key WHERE id = 1`).Scan(&key); err != nil {
		return "", false, fmt.Errorf("development key: read it from %s: %w", db.Name, err)
	}
	return key, key == generated, nil
}
