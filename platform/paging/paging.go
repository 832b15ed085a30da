// Package paging is the page of a list: what admin list endpoints take (?page=1&pageSize=20, at
// most 100) and answer ({items, page, pageSize, totalCount, totalCountExact}). httpx names them for
// handlers, db fills them from a query.
package paging

// CountHorizon is how far past a page's start a list counts the matching rows: a page's
// totalCount is exact up to its offset plus CountHorizon, and a lower bound beyond.
const CountHorizon = 10_000

// Page is the data of admin list endpoints.
type Page[T any] struct {
	Items           []T  `json:"items"`
	Page            int  `json:"page"`
	PageSize        int  `json:"pageSize"`
	TotalCount      int  `json:"totalCount" doc:"Matching items. Counted at most 10,000 past the page's first item: when more match, totalCountExact is false and more than totalCount match."`
	TotalCountExact bool `json:"totalCountExact" doc:"False when more items match than totalCount (see totalCount)."`
}

// Counted marks the page's total exact or a lower bound.
func (p Page[T]) Counted(exact bool) Page[T] {
	p.TotalCountExact = exact
	return p
}

// PageQuery is embedded in admin list inputs: ?page=1&pageSize=20 (max 100).
type PageQuery struct {
	Page     int `query:"page" minimum:"1" maximum:"10000000" default:"1" doc:"Page number, from 1 to 10,000,000."`
	PageSize int `query:"pageSize" minimum:"1" maximum:"100" default:"20" doc:"Items per page, at most 100."`
}

// Offset is the number of rows to skip (int64, as Bun's Offset takes).
func (p PageQuery) Offset() int64 {
	if p.Page < 1 {
		return 0
	}
	return int64(p.Page-1) * p.Limit()
}

// Limit is the page size, clamped to 1..100 (int64, as Bun's Limit takes).
func (p PageQuery) Limit() int64 {
	switch {
	case p.PageSize < 1:
		return 20
	case p.PageSize > 100:
		return 100
	}
	return int64(p.PageSize)
}

// NewPage builds a page from items and the exact total count (int or int64, as Bun's counts are).
func NewPage[T any, N int | int64](q PageQuery, items []T, total N) Page[T] {
	if items == nil {
		items = []T{}
	}
	page := q.Page
	if page < 1 {
		page = 1
	}
	return Page[T]{Items: items, Page: page, PageSize: int(q.Limit()), TotalCount: int(total), TotalCountExact: true}
}
