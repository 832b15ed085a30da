// Package cell is the client of the external workflow-automation cell: provisioning an account
// under an Idempotency-Key, deprovisioning it, and the errors of both (final or transient, with
// the cell's Retry-After), sanitised for users to read.
package cell

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"provisioner/platform/outbound"
)

// Request is the body of POST {BaseUrl}/accounts.
type Request struct {
	UserID       int64  `json:"userId"`
	Email        string `json:"email"`
	FullName     string `json:"fullName"`
	Organization string `json:"organization"`
}

// JSON is the body as sent.
func (r Request) JSON() []byte {
	raw, err := json.Marshal(r)
	if err != nil { // strings and a number: cannot happen
		panic(err)
	}
	return raw
}

// Account is the cell's answer; Email and UserID echo the request, when it does (nil: not sent).
type Account struct {
	AccountID string          `json:"accountId"`
	URL       string          `json:"url"`
	Email     *string         `json:"email"`
	UserID    json.RawMessage `json:"userId"`
}

// OtherUser names the echoed field (email, userId) showing got was made for another user than
// body's, or "". byEmail is false when body is a guess from the owner's details as they are now
// (the email may have changed since the key was first sent): then only userId tells.
func OtherUser(got Account, body []byte, byEmail bool) string {
	var sent Request
	if json.Unmarshal(body, &sent) != nil {
		return ""
	}
	if id := strings.Trim(string(got.UserID), `"`); id != "" && id != "null" && id != strconv.FormatInt(sent.UserID, 10) {
		return "userId"
	}
	if byEmail && got.Email != nil && !strings.EqualFold(strings.TrimSpace(*got.Email), sent.Email) {
		return "email"
	}
	return ""
}

// MsgOtherUser is the error of a cell's answer naming an account made for another user (%s: the
// echoed field that differs; the other user's value is never shown).
const MsgOtherUser = "suspicious answer: the account was made for another user (its %s differs from ours); refused"

// Error is a failed call; Final means no retry can succeed (a 4xx). A malformed 2xx is not final:
// a retry with the same Idempotency-Key gets the cell's answer again.
type Error struct {
	Status int
	Msg    string
	Final  bool
	// Wait is the cell's Retry-After (a 429, a 503), 0 when it sent none.
	Wait time.Duration
	// NotSent means the request never left: no connection to the cell was ever obtained.
	NotSent bool
	// Foreign means the cell answered the Idempotency-Key with an account made for another user
	// (a key another deployment sent first): nothing of ours is under that key.
	Foreign bool
}

// MadeNothing reports whether the call certainly made nothing at the cell: it was never sent, or
// the cell refused it (a final 4xx; a malformed 2xx answer may come with an account made).
func (e *Error) MadeNothing() bool {
	return e.NotSent || (e.Final && e.Status >= 400 && e.Status < 500)
}

// RetryAfter implements provision.RetryAfterer: the background finisher schedules the next
// attempt no sooner than the cell asked.
func (e *Error) RetryAfter() time.Duration { return e.Wait }

func (e *Error) Error() string {
	if e.Status > 0 {
		return fmt.Sprintf("wfauto cell answered %d: %s", e.Status, e.Msg)
	}
	return "wfauto cell: " + e.Msg
}

// Client is the client of the external provisioning cell (its calls: platform/outbound).
type Client struct{ http *outbound.Client }

// New builds the client; timeout bounds each call. A redirect is not followed but answered
// like any other status (transient, retried).
func New(base, key string, timeout time.Duration) *Client {
	return &Client{http: outbound.New(outbound.Options{Name: "wfauto cell", BaseURL: base, Accept: "application/json",
		Bearer: key, Timeout: timeout})}
}

// Configured reports whether a cell address is set.
func (c *Client) Configured() bool { return c.http.Configured() }

// call makes one call; a call without an answer is an *Error saying what happened.
func (c *Client) call(ctx context.Context, method, path, idemKey string, body []byte) (*outbound.Response, error) {
	r := outbound.Request{Method: method, Path: path, Body: body}
	if idemKey != "" {
		r.Header = http.Header{"Idempotency-Key": {idemKey}}
	}
	res, err := c.http.Do(ctx, r)
	var te *outbound.TransportError
	switch {
	case errors.As(err, &te) && te.What == outbound.WhatBadURL:
		return nil, &Error{Msg: "bad cell address", Final: true, NotSent: true}
	case errors.As(err, &te):
		return nil, &Error{Msg: te.What, NotSent: te.NotSent}
	}
	return res, err
}

// statusError describes a failed answer by its status and, from a documented {"error","message"}
// body, the cell's words redacted and bounded (any other body is dropped): the message is stored,
// shown and logged. The cell's Retry-After is kept for the finisher.
func (c *Client) statusError(res *outbound.Response) *Error {
	msg := ""
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(res.Body, &e) == nil {
		msg = c.http.Redact(e.Error+" "+e.Message, maxCellMessage)
	}
	msg = cmp.Or(msg, strings.ToLower(http.StatusText(res.Status)), "unexpected answer")
	return &Error{Status: res.Status, Msg: msg, Final: outbound.Refusal(res.Status), Wait: res.RetryAfter()}
}

// maxCellMessage bounds the cell's words kept in an error.
const maxCellMessage = 200

// Provision asks the cell for an account with body (a Request's JSON, sent as is); the
// idempotency key makes a repeated call return the same account rather than a second one, as
// long as it comes with the same body.
func (c *Client) Provision(ctx context.Context, idemKey string, body []byte) (Account, error) {
	a, err := c.call(ctx, http.MethodPost, "/accounts", idemKey, body)
	if err != nil {
		return Account{}, err
	}
	status := a.Status
	if status != http.StatusOK && status != http.StatusCreated {
		return Account{}, c.statusError(a)
	}
	// A 2xx we cannot read is transient: the retry with the same key gets the account.
	var out Account
	if err := json.Unmarshal(a.Body, &out); err != nil {
		return Account{}, &Error{Status: status, Msg: "malformed answer: not JSON"}
	}
	u, err := url.Parse(out.URL)
	if out.AccountID == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Account{}, &Error{Status: status, Msg: "malformed answer: accountId and an http(s) url are required"}
	}
	if !printable(out.AccountID, MaxAccountID) || !printable(out.URL, MaxAccountURL) {
		return Account{}, &Error{Status: status, Msg: fmt.Sprintf("malformed answer: accountId (at most %d bytes) "+
			"and url (at most %d bytes) must not hold control characters", MaxAccountID, MaxAccountURL)}
	}
	return out, nil
}

// MaxAccountID and MaxAccountURL bound the accountId and url of a cell's answer.
const (
	MaxAccountID  = 200
	MaxAccountURL = 2048
)

// printable reports whether s is at most max bytes without control characters (a NUL, a newline).
func printable(s string, max int) bool {
	return len(s) <= max && !strings.ContainsFunc(s, unicode.IsControl)
}

// Deprovision deletes an account; one that is already gone (404) is not an error.
func (c *Client) Deprovision(ctx context.Context, accountID string) error {
	a, err := c.call(ctx, http.MethodDelete, "/accounts/"+url.PathEscape(accountID), "", nil)
	if err != nil {
		return err
	}
	if a.Status == http.StatusNotFound || a.OK() {
		return nil
	}
	return c.statusError(a)
}
