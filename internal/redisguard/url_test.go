package redisguard

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestURLs(t *testing.T) {
	for _, tc := range []struct {
		url, err string
		addrs    int // cluster seed nodes; 0: a single server
	}{
		{url: "redis://127.0.0.1:6379/0"},
		{url: "rediss://:pw@redis.example:6380/2"},
		{url: "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002", addrs: 3},
		{url: "redis+cluster://user:p%40ss@10.0.0.1:7000/0", addrs: 1},
		{url: "rediss+cluster://h:7000/", addrs: 1},
		{url: "redis+cluster://h:7000,h2", err: `node "h2" is not host:port`},
		{url: "redis+cluster://h:7000,:7001", err: `node ":7001" is not host:port`},
		{url: "redis+cluster://h:99999", err: "is not host:port"},
		{url: "redis+cluster://h:7000/1", err: "database 0 only"},
		{url: "redis+cluster://h:7000?read_timeout=1s", err: "no query"},
		{url: "127.0.0.1:6379", err: "not a URL"},
		{url: "http://h:1", err: "invalid URL scheme"},
	} {
		c, err := NewClient(tc.url)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want an error with %q", tc.url, err, tc.err)
			}
			if CheckURL(tc.url) == nil {
				t.Errorf("%s: CheckURL accepted it", tc.url)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		switch cc := c.(type) {
		case *redis.ClusterClient:
			if n := len(cc.Options().Addrs); n != tc.addrs || !cc.Options().ContextTimeoutEnabled || cc.Options().MaxRetries > 0 {
				t.Errorf("%s: got a cluster client of %d nodes (%+v), want %d with context timeouts and no retries", tc.url, n, cc.Options(), tc.addrs)
			}
			if tc.url == "redis+cluster://user:p%40ss@10.0.0.1:7000/0" && (cc.Options().Username != "user" || cc.Options().Password != "p@ss") {
				t.Errorf("%s: user %q password %q", tc.url, cc.Options().Username, cc.Options().Password)
			}
		case *redis.Client:
			if tc.addrs != 0 || !cc.Options().ContextTimeoutEnabled || cc.Options().MaxRetries > 0 {
				t.Errorf("%s: got a single-server client, want %d cluster nodes", tc.url, tc.addrs)
			}
		}
		c.Close()
	}
}
