package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgdb"
)

// ModelSchemas is the store of fetched model schemas on this database,
// shared by the replicas: one fetch serves them all.
func (d *DB) ModelSchemas() modelschema.Store { return schemaStore{d} }

type schemaStore struct{ d *DB }

func (s schemaStore) ModelSchema(ctx context.Context, id string) (modelschema.Stored, error) {
	r, err := s.d.queries.ModelSchema(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return modelschema.Stored{}, provider.ErrNotFound
	}
	if err != nil {
		return modelschema.Stored{}, err
	}
	return modelschema.Stored{ModelID: r.ModelID, Info: r.Info, FetchedAt: time.UnixMilli(r.FetchedAt).UTC()}, nil
}

func (s schemaStore) PutModelSchema(ctx context.Context, st modelschema.Stored) error {
	return s.d.Write(ctx, func(ctx context.Context, tx *Tx) error {
		return tx.q.PutModelSchema(ctx, pgdb.PutModelSchemaParams{ModelID: st.ModelID, Info: st.Info, FetchedAt: st.FetchedAt.UnixMilli()})
	})
}
