package store

import "testing"

func TestRebindNumbersPlaceholdersOutsideQuotes(t *testing.T) {
	tests := []struct{ in, postgres string }{
		{"SELECT 1", "SELECT 1"},
		{"WHERE a = ? AND b > ?", "WHERE a = $1 AND b > $2"},
		{"WHERE a = '?' AND b = ?", "WHERE a = '?' AND b = $1"},
		{`SELECT "odd?name" FROM t WHERE x IN (?, ?, ?)`, `SELECT "odd?name" FROM t WHERE x IN ($1, $2, $3)`},
		{"VALUES (?, 'it''s ?', ?)", "VALUES ($1, 'it''s ?', $2)"},
	}
	for _, tt := range tests {
		if got := postgresDialect.rebind(tt.in); got != tt.postgres {
			t.Errorf("postgres rebind(%q) = %q, want %q", tt.in, got, tt.postgres)
		}
		if got := sqliteDialect.rebind(tt.in); got != tt.in {
			t.Errorf("sqlite rebind(%q) = %q, want it unchanged", tt.in, got)
		}
	}
}

func TestMigrationsAreNumberedFromOne(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if m.version != i+1 {
			t.Errorf("migration %s has version %d, want %d", m.name, m.version, i+1)
		}
	}
}
