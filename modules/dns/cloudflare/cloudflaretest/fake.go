// Package cloudflaretest is an in-process fake of the Cloudflare v4 DNS records API for tests: it
// keeps records per zone, checks the bearer token, answers with the v4 envelope and error codes
// (81044, 81053, 81057, 81058), and injects faults (5xx, 429 with Retry-After, slow answers).
package cloudflaretest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is one injected failure.
type Fault struct {
	Status     int           // 500, 503, 429…
	RetryAfter int           // seconds: a 429 always carries Retry-After, another status when > 0
	Delay      time.Duration // answer this late (a client timeout)
	Method     string        // only for this method ("" = any)
	// Echo answers Status (default 400) with an error whose message repeats the request's
	// Authorization header, as a careless provider or proxy may.
	Echo bool
	// Raw, when set, is the whole answer body, sent as it is with Status (default 200) and
	// ContentType (default application/json): a proxy's HTML page, an envelope of Cloudflare's
	// other error codes (7003 "Could not route to …"), a malformed or incomplete envelope.
	Raw         string
	ContentType string
	// Carried: the request is carried out first (a create stores its record, a delete removes
	// it), then answered with Raw instead of the real answer: an answer lost or mangled on the
	// way back.
	Carried bool
}

// seq numbers records across every Fake of the process: like the provider's, a record id is
// never given twice, even by the fakes of two tests sharing one control database.
var seq atomic.Int64

func nextID() string { return fmt.Sprintf("rec%06d", seq.Add(1)) }

// Fake is the fake provider.
type Fake struct {
	*httptest.Server
	Zone, Token, ZoneName string

	mu      sync.Mutex
	records map[string]record
	faults  []Fault
	// slow: calls of slowMethod ("" = any) answer slowBy late, until SetSlow(…, 0).
	slowMethod string
	slowBy     time.Duration
	// FaultRate, when > 0, fails that fraction of calls with a random fault of FaultMix.
	calls        atomic.Int64
	creates      atomic.Int64
	Delay        time.Duration                 // every answer this late
	randFault    atomic.Pointer[func() *Fault] // SetRandFault
	afterCreate  atomic.Pointer[func(id string)]
	beforeCreate atomic.Pointer[func(name string)]
}

// SetRandFault sets a function called per request (after the scripted and slow faults): a fault
// it returns is answered instead (nil: none). SetRandFault(nil) removes it. Safe while requests
// are served.
func (f *Fake) SetRandFault(h func() *Fault) {
	if h == nil {
		f.randFault.Store(nil)
		return
	}
	f.randFault.Store(&h)
}

// SetBeforeCreate sets a hook run when a create arrives, before the name is checked (e.g. another
// party takes the name between our lookup and our create); nil removes it.
func (f *Fake) SetBeforeCreate(h func(name string)) {
	if h == nil {
		f.beforeCreate.Store(nil)
		return
	}
	f.beforeCreate.Store(&h)
}

// SetAfterCreate sets a hook run after a record was stored and before the answer is written
// (e.g. to simulate a crash: the client never sees the answer); nil removes it.
func (f *Fake) SetAfterCreate(h func(id string)) {
	if h == nil {
		f.afterCreate.Store(nil)
		return
	}
	f.afterCreate.Store(&h)
}

type record struct {
	ID, Type, Name, Content, Comment string
	TTL                              int
	Proxied                          bool
	CreatedOn                        time.Time
}

// New starts a fake for zone with token; fqdn names end in zoneName.
func New(zone, token, zoneName string) *Fake {
	f := &Fake{Zone: zone, Token: token, ZoneName: zoneName, records: map[string]record{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// SetSlow makes every call of method ("" = any) answer d late, or not at all when the client
// gives up first (nothing is then stored), until SetSlow is called with d = 0: a provider that is
// slow for a while, then recovers.
func (f *Fake) SetSlow(method string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slowMethod, f.slowBy = method, d
}

// Fail queues faults for the next calls.
func (f *Fake) Fail(faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, faults...)
}

// Calls and Creates count requests and stored records.
func (f *Fake) Calls() int64   { return f.calls.Load() }
func (f *Fake) Creates() int64 { return f.creates.Load() }

// Records returns a snapshot, by id.
func (f *Fake) Records() map[string]Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]Record{}
	for id, r := range f.records {
		out[id] = Record{ID: r.ID, Type: r.Type, Name: r.Name, Content: r.Content, TTL: r.TTL, Proxied: r.Proxied, Comment: r.Comment}
	}
	return out
}

// Record is a stored record as tests see it. Type is "A" unless set (PutRecord: "AAAA", "CNAME",
// "TXT", "MX"… another party's record at the name).
type Record struct {
	ID, Type, Name, Content, Comment string
	TTL                              int
	Proxied                          bool
}

// Put stores a record directly (another party's record, or a leftover).
func (f *Fake) Put(name, content string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := nextID()
	f.records[id] = record{ID: id, Type: "A", Name: f.fqdn(name), Content: content, TTL: 1, CreatedOn: time.Now()}
	return id
}

// PutRecord stores r (its name completed with the zone's) as if created through the API, without
// counting it as a create, and returns its id.
func (f *Fake) PutRecord(r Record) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := nextID()
	typ := r.Type
	if typ == "" {
		typ = "A"
	}
	f.records[id] = record{ID: id, Type: typ, Name: f.fqdn(r.Name), Content: r.Content, TTL: r.TTL, Proxied: r.Proxied,
		Comment: r.Comment, CreatedOn: time.Now()}
	return id
}

// SetContent changes a stored record's content and keeps its comment, as someone editing it in
// the provider's dashboard would; false when there is no such record.
func (f *Fake) SetContent(id, content string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.records[id]
	if ok {
		r.Content = content
		f.records[id] = r
	}
	return ok
}

func (f *Fake) fqdn(name string) string {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if f.ZoneName != "" && name != f.ZoneName && !strings.HasSuffix(name, "."+f.ZoneName) {
		return name + "." + f.ZoneName
	}
	return name
}

type msg struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func write(w http.ResponseWriter, status int, result any, errs ...msg) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if errs == nil {
		errs = []msg{}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"success": len(errs) == 0 && status < 300, "errors": errs, "messages": []msg{}, "result": result})
}

func (r record) view(zone string) map[string]any {
	return map[string]any{"id": r.ID, "type": r.Type, "name": r.Name, "content": r.Content, "ttl": r.TTL,
		"proxied": r.Proxied, "comment": r.Comment, "zone_id": zone, "created_on": r.CreatedOn.Format(time.RFC3339),
		"modified_on": r.CreatedOn.Format(time.RFC3339), "proxiable": true, "locked": false}
}

func (f *Fake) nextFault(method string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, ft := range f.faults {
		if ft.Method == "" || ft.Method == method {
			f.faults = append(f.faults[:i], f.faults[i+1:]...)
			return &ft
		}
	}
	return nil
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if f.Delay > 0 {
		time.Sleep(f.Delay)
	}
	if r.Header.Get("Authorization") != "Bearer "+f.Token {
		write(w, http.StatusForbidden, nil, msg{9109, "Invalid access token"})
		return
	}
	ft := f.nextFault(r.Method)
	if ft == nil {
		f.mu.Lock()
		if f.slowBy > 0 && (f.slowMethod == "" || f.slowMethod == r.Method) {
			ft = &Fault{Delay: f.slowBy}
		}
		f.mu.Unlock()
	}
	if h := f.randFault.Load(); ft == nil && h != nil {
		ft = (*h)()
	}
	if ft != nil {
		if ft.Delay > 0 {
			select {
			case <-time.After(ft.Delay):
			case <-r.Context().Done():
				return
			}
		}
		if ft.RetryAfter > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(ft.RetryAfter))
		}
		if ft.Raw != "" {
			if ft.Carried {
				f.handle(httptest.NewRecorder(), r)
			}
			status := ft.Status
			if status == 0 {
				status = http.StatusOK
			}
			ct := ft.ContentType
			if ct == "" {
				ct = "application/json"
			}
			w.Header().Set("Content-Type", ct)
			w.WriteHeader(status)
			_, _ = w.Write([]byte(ft.Raw))
			return
		}
		if ft.Echo {
			status := ft.Status
			if status == 0 {
				status = http.StatusBadRequest
			}
			write(w, status, nil, msg{9005, "Content for A record is invalid. token=" + r.Header.Get("Authorization")})
			return
		}
		if ft.Status != 0 {
			if ft.Status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", fmt.Sprint(ft.RetryAfter))
				write(w, ft.Status, nil, msg{971, "Please wait and consider throttling your request speed"})
				return
			}
			write(w, ft.Status, nil, msg{10000, "Internal server error"})
			return
		}
	}
	f.handle(w, r)
}

// handle carries out an authorised request without a fault.
func (f *Fake) handle(w http.ResponseWriter, r *http.Request) {
	prefix := "/zones/" + f.Zone + "/dns_records"
	if !strings.HasPrefix(r.URL.Path, prefix) {
		write(w, http.StatusNotFound, nil, msg{7003, "Could not route to " + r.URL.Path + ", perhaps your object identifier is invalid?"})
		return
	}
	id := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
	switch {
	case r.Method == http.MethodPost && id == "":
		f.create(w, r)
	case r.Method == http.MethodGet && id == "":
		f.list(w, r)
	case r.Method == http.MethodGet: // one record's details, as the real API answers them
		f.mu.Lock()
		rec, ok := f.records[id]
		f.mu.Unlock()
		if !ok {
			write(w, http.StatusNotFound, nil, msg{81044, "Record does not exist."})
			return
		}
		write(w, http.StatusOK, rec.view(f.Zone))
	case r.Method == http.MethodDelete && id != "":
		f.mu.Lock()
		_, ok := f.records[id]
		delete(f.records, id)
		f.mu.Unlock()
		if !ok {
			write(w, http.StatusNotFound, nil, msg{81044, "Record does not exist."})
			return
		}
		write(w, http.StatusOK, map[string]any{"id": id})
	default:
		write(w, http.StatusMethodNotAllowed, nil, msg{10405, "Method not allowed"})
	}
}

func (f *Fake) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Type    string `json:"type"`
		Name    string `json:"name"`
		Content string `json:"content"`
		TTL     int    `json:"ttl"`
		Proxied bool   `json:"proxied"`
		Comment string `json:"comment"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Name == "" || in.Content == "" {
		write(w, http.StatusBadRequest, nil, msg{9207, "Request body is invalid."})
		return
	}
	if in.Type != "A" {
		write(w, http.StatusBadRequest, nil, msg{9004, "This record type is not supported here."})
		return
	}
	if in.TTL != 1 && (in.TTL < 60 || in.TTL > 86400) {
		write(w, http.StatusBadRequest, nil, msg{9021, "Invalid TTL. Must be between 60 and 86400 seconds, or 1 for Automatic."})
		return
	}
	name := f.fqdn(in.Name)
	if h := f.beforeCreate.Load(); h != nil {
		(*h)(name)
	}
	f.mu.Lock()
	for _, rec := range f.records {
		// Like the real API, a CNAME takes its name whole; an A record is refused beside an A
		// record (identical or, unlike the real API, any: the fake keeps one A per name), while
		// AAAA, TXT, MX… records at the name do not stop it.
		if rec.Name == name && (rec.Type == "A" || rec.Type == "CNAME") {
			f.mu.Unlock()
			if rec.Type == "A" && rec.Content == in.Content {
				write(w, http.StatusBadRequest, nil, msg{81058, "An identical record already exists."})
			} else {
				write(w, http.StatusBadRequest, nil, msg{81053, "An A, AAAA, or CNAME record with that host already exists."})
			}
			return
		}
	}
	if in.Proxied {
		in.TTL = 1 // like the real API: a proxied record's TTL is automatic, whatever was sent
	}
	rec := record{ID: nextID(), Type: "A", Name: name, Content: in.Content, TTL: in.TTL,
		Proxied: in.Proxied, Comment: in.Comment, CreatedOn: time.Now().UTC()}
	f.records[rec.ID] = rec
	f.mu.Unlock()
	f.creates.Add(1)
	if h := f.afterCreate.Load(); h != nil {
		(*h)(rec.ID)
	}
	write(w, http.StatusOK, rec.view(f.Zone))
}

func (f *Fake) list(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	typ := r.URL.Query().Get("type")
	f.mu.Lock()
	out := []map[string]any{}
	for _, rec := range f.records {
		if (name == "" || rec.Name == f.fqdn(name)) && (typ == "" || rec.Type == typ) {
			out = append(out, rec.view(f.Zone))
		}
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"success": true, "errors": []msg{}, "messages": []msg{}, "result": out,
		"result_info": map[string]int{"page": 1, "per_page": 100, "count": len(out), "total_count": len(out), "total_pages": 1}})
}
