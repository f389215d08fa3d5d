package mysqltest

import (
	"context"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

func TestDatabaseTakesATable(t *testing.T) {
	db := Open(t, Database(t))
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count = %d, %v", n, err)
	}
}

func TestPrivateSurvivesAKill(t *testing.T) {
	own := Private(t)
	db := Open(t, DatabaseOn(t, own.URL))
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	own.Halt()
	own.Resume(t)
	var id int
	if err := db.QueryRowContext(ctx, "SELECT id FROM t").Scan(&id); err != nil || id != 7 {
		t.Fatalf("after restart id = %d, %v", id, err)
	}
}

func TestWithDatabase(t *testing.T) {
	for in, want := range map[string]string{
		"root@tcp(h:1)/":         "root@tcp(h:1)/d",
		"root@tcp(h:1)/x?a=b":    "root@tcp(h:1)/d?a=b",
		"u:p@tcp(h:1)/?tls=true": "u:p@tcp(h:1)/d?tls=true",
	} {
		if got := WithDatabase(in, "d"); got != want {
			t.Errorf("WithDatabase(%q) = %q, want %q", in, got, want)
		}
	}
}
