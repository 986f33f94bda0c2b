package rows_test

import (
	"reflect"
	"testing"

	"github.com/darkroom-mcp/darkroom/storage/postgres/pgdb"
	"github.com/darkroom-mcp/darkroom/storage/rows"
	"github.com/darkroom-mcp/darkroom/storage/sqlite/sqlitedb"
)

// The two engines' generated rows and parameters, each assigned to the
// one type of this package: this compiles only while both schemas and
// their queries agree, field for field (the engines' calls check the
// same; this says it in one place).
var (
	_ rows.Generation = sqlitedb.GetGenerationRow{}
	_ rows.Generation = pgdb.Generation{}
	_ rows.Task       = sqlitedb.Task{}
	_ rows.Task       = pgdb.Task{}

	_ rows.InsertGenerationParams = sqlitedb.InsertGenerationParams{}
	_ rows.InsertGenerationParams = pgdb.InsertGenerationParams{}
	_ rows.InsertTaskParams       = sqlitedb.InsertTaskParams{}
	_ rows.InsertTaskParams       = pgdb.InsertTaskParams{}

	_ = pgdb.WebhookDelivery(sqlitedb.WebhookDelivery{})
	_ = pgdb.CreateBucket(sqlitedb.CreateBucket{})
)

// TestTablesAgree compares the tables themselves. SQLite's generations
// table grew by ALTER TABLE, which appends, so its model lists the columns
// in another order than PostgreSQL's and cannot be assigned; the SQLite
// queries name the columns in PostgreSQL's order instead. Here the models
// must hold the same columns with the same Go types, in any order.
func TestTablesAgree(t *testing.T) {
	for _, m := range []struct{ sqlite, pg any }{
		{sqlitedb.Generation{}, pgdb.Generation{}},
		{sqlitedb.Task{}, pgdb.Task{}},
		{sqlitedb.WebhookDelivery{}, pgdb.WebhookDelivery{}},
		{sqlitedb.CreateBucket{}, pgdb.CreateBucket{}},
	} {
		s, p := columns(m.sqlite), columns(m.pg)
		if !reflect.DeepEqual(s, p) {
			t.Errorf("%T and %T differ:\nsqlite   %v\npostgres %v", m.sqlite, m.pg, s, p)
		}
	}
}

func columns(model any) map[string]reflect.Type {
	rt := reflect.TypeOf(model)
	out := make(map[string]reflect.Type, rt.NumField())
	for i := range rt.NumField() {
		out[rt.Field(i).Name] = rt.Field(i).Type
	}
	return out
}
