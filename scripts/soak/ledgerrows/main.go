// Command ledgerrows prints the number of rows of a streamgate SQLite usage
// ledger (table usage_entries), and with -by the rows per outcome and status.
// scripts/soak/soak.sh uses it when the sqlite3 CLI is not installed, to
// compare the ledger with the requests the gateway and the benchmark counted.
//
// It is a measuring tool, not part of streamgate.
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"log"
	"net/url"

	_ "modernc.org/sqlite" // the driver internal/usage uses, registered as "sqlite"
)

func main() {
	by := flag.Bool("by", false, "also print the rows per outcome and status, tab-separated")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: ledgerrows [-by] PATH.db")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		log.Fatal("ledgerrows: want one database path")
	}
	// Read-only and with a busy timeout: the gateway may still hold the file.
	q := url.Values{"mode": {"ro"}, "_pragma": {"busy_timeout(5000)"}}
	db, err := sql.Open("sqlite", "file:"+flag.Arg(0)+"?"+q.Encode())
	if err != nil {
		log.Fatalf("ledgerrows: open %s: %v", flag.Arg(0), err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow(`SELECT count(*) FROM usage_entries`).Scan(&n); err != nil {
		log.Fatalf("ledgerrows: count rows of %s: %v", flag.Arg(0), err)
	}
	fmt.Println(n)
	if !*by {
		return
	}
	rows, err := db.Query(`SELECT outcome, status, count(*) FROM usage_entries GROUP BY outcome, status ORDER BY 3 DESC`)
	if err != nil {
		log.Fatalf("ledgerrows: group rows of %s: %v", flag.Arg(0), err)
	}
	defer rows.Close()
	for rows.Next() {
		var outcome string
		var status, count int64
		if err := rows.Scan(&outcome, &status, &count); err != nil {
			log.Fatalf("ledgerrows: scan: %v", err)
		}
		fmt.Printf("%s\t%d\t%d\n", outcome, status, count)
	}
	if err := rows.Err(); err != nil {
		log.Fatalf("ledgerrows: rows of %s: %v", flag.Arg(0), err)
	}
}
