package httpx

import (
	"bytes"
	"log/slog"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/gofiber/fiber/v2"

	"provisioner/platform/paging"
)

// Envelope is the body of every JSON response: ServiceResponse<T> of the original service. Its
// members are described once, in the API's description (newAPI), not in each envelope's schema.
type Envelope[T any] struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
	Data    T      `json:"data"`
}

// Response is a huma output carrying an envelope and a status chosen by the handler.
type Response[T any] struct {
	Status int `json:"-"`
	Body   Envelope[T]
}

// OK answers 200 with data.
func OK[T any](message string, data T) *Response[T] {
	return &Response[T]{Status: http.StatusOK, Body: Envelope[T]{Success: true, Message: message, Data: data}}
}

// Created answers 201 with data.
func Created[T any](message string, data T) *Response[T] {
	return &Response[T]{Status: http.StatusCreated, Body: Envelope[T]{Success: true, Message: message, Data: data}}
}

// NoData is the data of an answer that has none: it is written as null, and the OpenAPI document
// says so (`data: null`) rather than promising an object.
type NoData struct{}

// MarshalJSON writes null.
func (NoData) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// Schema implements huma.SchemaProvider.
func (NoData) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: "null", Description: "Always null: this answer carries no data."}
}

// Done answers 200 with a message and no data (`data: null`).
func Done(message string) *Response[NoData] { return OK(message, NoData{}) }

// Page is the data of admin list endpoints (paging.Page).
type Page[T any] = paging.Page[T]

// PageQuery is embedded in admin list inputs: ?page=1&pageSize=20, at most 100 (paging.PageQuery).
type PageQuery = paging.PageQuery

// NewPage builds a page from items and the total count (paging.NewPage).
func NewPage[T any, N int | int64](q PageQuery, items []T, total N) Page[T] {
	return paging.NewPage(q, items, total)
}

// WriteHandlerError writes err on c as huma writes an error its operation's handler returned
// (mapHumaError, then huma's JSON format: the same bytes, headers and log line), for a Fiber route
// answering some requests ahead of a huma operation.
func WriteHandlerError(c *fiber.Ctx, err error) error {
	out := FromError(err)
	if out.Status >= 500 {
		slog.ErrorContext(c.UserContext(), "request failed", "requestId", RequestID(c.UserContext()), "error", err.Error())
	}
	for k, v := range out.headers {
		c.Set(k, v)
	}
	return WriteHumaJSON(c, out.Status, out)
}

// WriteHumaJSON writes v with status as huma writes a JSON answer (huma.DefaultJSONFormat: no
// HTML escaping, a final newline; Content-Type: application/json).
func WriteHumaJSON(c *fiber.Ctx, status int, v any) error {
	var buf bytes.Buffer
	if err := huma.DefaultJSONFormat.Marshal(&buf, v); err != nil {
		return err
	}
	c.Status(status)
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	return c.Send(buf.Bytes())
}
