package queues

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"provisioner/platform/outbound"
)

// Broker is a client of the RabbitMQ management HTTP API: the calls that make and remove a
// queue space (a virtual host, its limits, a user and the user's permissions on it). The calls
// themselves are platform/outbound's.
type Broker struct{ http *outbound.Client }

// NewBroker builds the client; timeout bounds each call.
func NewBroker(c Config) *Broker {
	return &Broker{http: outbound.New(outbound.Options{Name: "RabbitMQ management API", BaseURL: c.ManagementUrl,
		User: c.Username, Password: c.Password, Timeout: time.Duration(c.TimeoutSeconds) * time.Second})}
}

// BrokerError is a management API call that did not succeed. Final: a refusal no retry changes
// (the API's own 4xx, other than 408 and 429); anything else (a 5xx, a timeout, an unreadable
// answer, a page that is not the API's) may have been carried out and is retried.
type BrokerError struct {
	Op     string
	Status int // 0: no answer
	Msg    string
	Final  bool
	Wait   time.Duration
}

func (e *BrokerError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("RabbitMQ management API: %s: %s", e.Op, e.Msg)
	}
	return fmt.Sprintf("RabbitMQ management API: %s: %d %s", e.Op, e.Status, e.Msg)
}

// RetryAfter implements provision.RetryAfterer.
func (e *BrokerError) RetryAfter() time.Duration { return e.Wait }

// errorBody is the management API's error answer.
type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// notFound reports a 404 of the management API itself about a missing object (not a proxy's or a
// wrong address's 404, which is an error).
func notFound(res *outbound.Response) bool {
	var e errorBody
	return res.Status == http.StatusNotFound && json.Unmarshal(res.Body, &e) == nil && e.Error == "Object Not Found"
}

// do sends one call and returns the answer (its body at most 1 MiB); a call without an answer
// is a BrokerError saying what happened.
func (b *Broker) do(ctx context.Context, method, path string, in any) (*outbound.Response, error) {
	if !b.http.Configured() {
		return nil, &BrokerError{Op: method + " " + path, Msg: "not configured (Queues:ManagementUrl)"}
	}
	res, err := b.http.Do(ctx, outbound.Request{Method: method, Path: path, JSON: in})
	var te *outbound.TransportError
	if errors.As(err, &te) {
		return nil, &BrokerError{Op: method + " " + opPath(path), Msg: te.What, Final: te.What == outbound.WhatBadURL}
	}
	return res, err
}

// opPath is path with its object names left out (they are ours, but errors are shown to users
// and logged: the kind of call is enough).
func opPath(path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/api/"), "/")
	out := "/api/" + parts[0]
	if len(parts) > 3 {
		out += "/…/" + parts[len(parts)-1]
	} else if len(parts) > 1 {
		out += "/…"
	}
	return out
}

// failure turns an unexpected answer to the call method path into a BrokerError.
func (b *Broker) failure(method, path string, res *outbound.Response) *BrokerError {
	e := &BrokerError{Op: method + " " + opPath(path), Status: res.Status, Wait: res.RetryAfter()}
	var eb errorBody
	api := json.Unmarshal(res.Body, &eb) == nil && (eb.Error != "" || eb.Reason != "")
	switch {
	case api:
		e.Msg = strings.TrimSpace(eb.Error + ": " + eb.Reason)
	case res.OK():
		e.Msg = "unreadable answer"
	default:
		e.Msg = http.StatusText(res.Status) + " (not the API's answer)"
	}
	e.Msg = b.http.Redact(e.Msg, 200)
	// Only the API's own refusal is final: a page of something else in front of it (a proxy's
	// 404, a login portal) says nothing about what the broker did.
	e.Final = api && outbound.Refusal(res.Status)
	return e
}

// put sends a PUT that creates or updates an object: RabbitMQ answers 201 (created) or 204.
func (b *Broker) put(ctx context.Context, path string, in any) error {
	res, err := b.do(ctx, http.MethodPut, path, in)
	if err != nil {
		return err
	}
	if res.Status == http.StatusCreated || res.Status == http.StatusNoContent {
		return nil
	}
	return b.failure(http.MethodPut, path, res)
}

// get reads an object into out; found is false for the API's own 404.
func (b *Broker) get(ctx context.Context, path string, out any) (found bool, err error) {
	res, err := b.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return false, err
	}
	if notFound(res) {
		return false, nil
	}
	if res.Status != http.StatusOK {
		return false, b.failure(http.MethodGet, path, res)
	}
	if err := json.Unmarshal(res.Body, out); err != nil {
		return false, &BrokerError{Op: "GET " + opPath(path), Status: res.Status, Msg: "unreadable answer"}
	}
	return true, nil
}

// del deletes an object; one already gone (the API's 404) is not an error.
func (b *Broker) del(ctx context.Context, path string) error {
	res, err := b.do(ctx, http.MethodDelete, path, nil)
	if err != nil {
		return err
	}
	if res.Status == http.StatusNoContent || notFound(res) {
		return nil
	}
	return b.failure(http.MethodDelete, path, res)
}

func esc(s string) string { return url.PathEscape(s) }

// VHost is a virtual host as the API lists it.
type VHost struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// User is a user as the API lists it.
type User struct {
	Name string `json:"name"`
	Tags any    `json:"tags"` // a string before RabbitMQ 3.9, a list since
}

// Permission is a user's permissions on a virtual host.
type Permission struct {
	User      string `json:"user"`
	VHost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// LookupVHost reads a virtual host; nil when there is none.
func (b *Broker) LookupVHost(ctx context.Context, name string) (*VHost, error) {
	v := new(VHost)
	found, err := b.get(ctx, "/api/vhosts/"+esc(name), v)
	if !found {
		return nil, err
	}
	return v, nil
}

// PutVHost creates a virtual host (or leaves it as it is).
func (b *Broker) PutVHost(ctx context.Context, name, description string) error {
	return b.put(ctx, "/api/vhosts/"+esc(name), map[string]any{"description": description, "tags": "provisioner"})
}

// LimitVHost sets a virtual host's limits on connections and queues.
func (b *Broker) LimitVHost(ctx context.Context, name string, maxConnections, maxQueues int) error {
	if err := b.put(ctx, "/api/vhost-limits/"+esc(name)+"/max-connections", map[string]any{"value": maxConnections}); err != nil {
		return err
	}
	return b.put(ctx, "/api/vhost-limits/"+esc(name)+"/max-queues", map[string]any{"value": maxQueues})
}

// LookupUser reads a user; nil when there is none.
func (b *Broker) LookupUser(ctx context.Context, name string) (*User, error) {
	u := new(User)
	found, err := b.get(ctx, "/api/users/"+esc(name), u)
	if !found {
		return nil, err
	}
	return u, nil
}

// PutUser creates a user without management tags (it may use AMQP only).
func (b *Broker) PutUser(ctx context.Context, name, password string) error {
	return b.put(ctx, "/api/users/"+esc(name), map[string]any{"password": password, "tags": ""})
}

// Grant gives user every permission on vhost, and nothing elsewhere.
func (b *Broker) Grant(ctx context.Context, vhost, user string) error {
	return b.put(ctx, "/api/permissions/"+esc(vhost)+"/"+esc(user), map[string]any{"configure": ".*", "write": ".*", "read": ".*"})
}

// LookupPermission reads user's permissions on vhost; nil when there are none.
func (b *Broker) LookupPermission(ctx context.Context, vhost, user string) (*Permission, error) {
	p := new(Permission)
	found, err := b.get(ctx, "/api/permissions/"+esc(vhost)+"/"+esc(user), p)
	if !found {
		return nil, err
	}
	return p, nil
}

// DeleteUser removes a user (gone already: not an error); it can no longer log in.
func (b *Broker) DeleteUser(ctx context.Context, name string) error {
	return b.del(ctx, "/api/users/"+esc(name))
}

// DeleteVHost removes a virtual host with its queues, closing its connections (gone already: not
// an error).
func (b *Broker) DeleteVHost(ctx context.Context, name string) error {
	return b.del(ctx, "/api/vhosts/"+esc(name))
}

// CloseConnections closes every open connection of user (from the broker's connection tracking,
// so a connection just opened is not missed).
func (b *Broker) CloseConnections(ctx context.Context, user string) error {
	return b.del(ctx, "/api/connections/username/"+esc(user))
}
