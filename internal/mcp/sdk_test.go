package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// sdkServer is a Server (the upstream seam) over a Go SDK connection to a
// Go SDK server: the tests' stand-in for package upstream's client. It
// initializes in 2025-11-25, renumbers the requests it sends, routes
// progress by token and a server's requests to the one call running (else
// to listeners), as the seam says.
type sdkServer struct {
	conn sdk.Connection
	info Info

	mu        sync.Mutex
	next      int64
	pending   map[string]*pendingCall // by our id
	listeners map[*func(Event)]struct{}
	calls     int // tools/call requests sent
	closed    bool
	done      chan struct{}
}

type pendingCall struct {
	method string
	token  string
	on     func(Event)
	resp   chan *jsonrpc.Message
}

func toSDK(m *jsonrpc.Message) (sdkjsonrpc.Message, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return sdkjsonrpc.DecodeMessage(b)
}

func fromSDK(m sdkjsonrpc.Message) (*jsonrpc.Message, error) {
	b, err := sdkjsonrpc.EncodeMessage(m)
	if err != nil {
		return nil, err
	}
	var out jsonrpc.Message
	return &out, json.Unmarshal(b, &out)
}

// newSDKServer connects to srv in memory (HTTP to the server is the upstream package's).
func newSDKServer(t testing.TB, srv *sdk.Server) *sdkServer {
	t.Helper()
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := &sdkServer{conn: conn, pending: map[string]*pendingCall{}, listeners: map[*func(Event)]struct{}{}, done: make(chan struct{})}
	go s.read()
	init := &jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage("0"), Method: "initialize",
		Params: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{}}},"clientInfo":{"name":"streamgate-test","version":"1"}}`)}
	resp, err := s.Call(ctx, init, nil)
	if err != nil || resp.Error != nil {
		t.Fatalf("initialize: %v %v", err, resp)
	}
	s.info = Info{ProtocolVersion: "2025-11-25", Result: resp.Result}
	if err := s.Notify(ctx, &jsonrpc.Message{JSONRPC: "2.0", Method: "notifications/initialized"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		ss.Close()
	})
	return s
}

func (s *sdkServer) read() {
	defer close(s.done)
	for {
		raw, err := s.conn.Read(context.Background())
		if err != nil {
			return
		}
		m, err := fromSDK(raw)
		if err != nil {
			continue
		}
		s.mu.Lock()
		switch {
		case m.Method == "" && m.ID != nil: // a response
			if p := s.pending[string(m.ID)]; p != nil {
				delete(s.pending, string(m.ID))
				p.resp <- m
			}
			s.mu.Unlock()
		case m.Method == "notifications/progress":
			var pp struct {
				Token any `json:"progressToken"`
			}
			json.Unmarshal(m.Params, &pp)
			var to func(Event)
			for _, p := range s.pending {
				if p.token != "" && p.token == fmt.Sprint(pp.Token) {
					to = p.on
				}
			}
			s.mu.Unlock()
			if to != nil {
				to(Event{Msg: m})
			}
		default: // a server request (to the one tools/call running) or an unsolicited notification
			var to []func(Event)
			if m.ID != nil {
				for _, p := range s.pending {
					if p.method == "tools/call" && p.on != nil {
						to = append(to, p.on)
					}
				}
			}
			if len(to) != 1 {
				to = to[:0]
				for l := range s.listeners {
					to = append(to, *l)
				}
			}
			s.mu.Unlock()
			ev := Event{Msg: m}
			if m.ID != nil {
				ev.ReplyTo = string(m.ID)
			}
			for _, on := range to {
				on(ev)
			}
		}
	}
}

func (s *sdkServer) Call(ctx context.Context, req *jsonrpc.Message, on func(Event)) (*jsonrpc.Message, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.next++
	id := strconv.FormatInt(s.next, 10)
	p := &pendingCall{method: req.Method, on: on, resp: make(chan *jsonrpc.Message, 1)}
	var params struct {
		Meta struct {
			Token any `json:"progressToken"`
		} `json:"_meta"`
	}
	json.Unmarshal(req.Params, &params)
	if params.Meta.Token != nil {
		p.token = fmt.Sprint(params.Meta.Token)
	}
	if req.Method == "tools/call" {
		s.calls++
	}
	s.pending[id] = p
	s.mu.Unlock()
	out := *req
	out.ID = json.RawMessage(id)
	m, err := toSDK(&out)
	if err != nil {
		return nil, err
	}
	if err := s.conn.Write(ctx, m); err != nil {
		return nil, err
	}
	select {
	case resp := <-p.resp:
		resp.ID = req.ID
		return resp, nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		n, _ := toSDK(&jsonrpc.Message{JSONRPC: "2.0", Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":` + id + `}`)})
		s.conn.Write(context.Background(), n)
		return nil, ctx.Err()
	case <-s.done:
		return nil, ErrClosed
	}
}

func (s *sdkServer) Notify(ctx context.Context, n *jsonrpc.Message) error {
	m, err := toSDK(n)
	if err != nil {
		return err
	}
	return s.conn.Write(ctx, m)
}

func (s *sdkServer) Reply(ctx context.Context, replyTo string, resp *jsonrpc.Message) error {
	out := *resp
	out.ID = json.RawMessage(replyTo)
	out.Method = ""
	m, err := toSDK(&out)
	if err != nil {
		return err
	}
	return s.conn.Write(ctx, m)
}

func (s *sdkServer) Listen(ctx context.Context, on func(Event)) error {
	s.mu.Lock()
	s.listeners[&on] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, &on)
		s.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return nil
	case <-s.done:
		return ErrClosed
	}
}

func (s *sdkServer) Info(context.Context) (Info, error) { return s.info, nil }

func (s *sdkServer) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if !already {
		s.conn.Close()
		<-s.done
	}
	return nil
}

func (s *sdkServer) toolCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// testGovernor authenticates the keys it holds (Bearer or x-api-key) and
// keeps the ledger rows it is given.
type testGovernor struct {
	keys map[string]*Caller // by secret
	mu   sync.Mutex
	rows []ToolCall
	// refuse, when set, refuses every call (a budget spent).
	refuse error
}

func (g *testGovernor) Authenticate(r *http.Request) (*Caller, error) {
	secret := r.Header.Get("X-Api-Key")
	if h := r.Header.Get("Authorization"); h != "" {
		secret = h[len("Bearer "):]
	}
	c, ok := g.keys[secret]
	if !ok {
		return nil, errors.New("invalid API key")
	}
	cc := *c
	return &cc, nil
}

func (g *testGovernor) Admit(_ context.Context, _ *Caller, _, _ string, _ float64) (func(float64), error) {
	if g.refuse != nil {
		return nil, g.refuse
	}
	return func(float64) {}, nil
}

func (g *testGovernor) Record(c ToolCall) {
	g.mu.Lock()
	g.rows = append(g.rows, c)
	g.mu.Unlock()
}

func (g *testGovernor) ledger() []ToolCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]ToolCall(nil), g.rows...)
}
