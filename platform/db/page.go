package db

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	"provisioner/platform/paging"
)

// ListPage runs q, a select into rows already filtered by the caller, newest first (by
// created_at, then id), for one page, and maps the rows to their API views with the total count
// (Page).
func ListPage[T, V any](ctx context.Context, q *bun.SelectQuery, rows *[]T, p paging.PageQuery, view func(*T) V) (paging.Page[V], error) {
	return listPage(ctx, Page[T], q, rows, p, view)
}

// ListPageFew is ListPage for a filter that matches few rows through an unordered index (PageFew).
func ListPageFew[T, V any](ctx context.Context, q *bun.SelectQuery, rows *[]T, p paging.PageQuery, view func(*T) V) (paging.Page[V], error) {
	return listPage(ctx, PageFew[T], q, rows, p, view)
}

type pager[T any] func(context.Context, *bun.SelectQuery, *[]T, string, paging.PageQuery) (int64, bool, error)

func listPage[T, V any](ctx context.Context, page pager[T], q *bun.SelectQuery, rows *[]T, p paging.PageQuery, view func(*T) V) (paging.Page[V], error) {
	total, exact, err := page(ctx, q, rows, "created_at DESC, id DESC", p)
	if err != nil {
		return paging.Page[V]{}, err
	}
	items := make([]V, len(*rows))
	for i := range *rows {
		items[i] = view(&(*rows)[i])
	}
	return paging.NewPage(p, items, total).Counted(exact), nil
}

// Page scans one page of q (a select into rows, on its DB) in order and counts the matching rows, up to
// paging.CountHorizon past the page's start: counting every match of a large table costs a scan of
// all of it, while a bounded count reads at most as many index entries as the page's OFFSET plus
// the horizon. exact is false when more rows match than were counted; total is then that bound.
// A page shorter than its size that is not past the end needs no count at all.
func Page[T any](ctx context.Context, q *bun.SelectQuery, rows *[]T, order string, p paging.PageQuery) (total int64, exact bool, err error) {
	counter := q.Clone()
	if err := q.OrderExpr(order).Limit(p.Limit()).Offset(p.Offset()).Scan(ctx); err != nil {
		return 0, false, fmt.Errorf("list page: %w", err)
	}
	n := len(*rows)
	if n > 0 && int64(n) < p.Limit() || n == 0 && p.Offset() == 0 {
		return p.Offset() + int64(n), true, nil
	}
	bound := p.Offset() + paging.CountHorizon
	// SELECT count(*) FROM (SELECT 1 FROM … WHERE … LIMIT bound+1): an index-only scan that stops.
	err = counter.DB().NewSelect().ColumnExpr("count(*)").
		TableExpr("(?) AS matching", counter.ColumnExpr("1").Limit(bound+1)).Scan(ctx, &total)
	if err != nil {
		return 0, false, fmt.Errorf("count page: %w", err)
	}
	if total > bound {
		return bound, false, nil
	}
	return total, true, nil
}

// PageFew is Page for a filter served by an index that finds the matches unordered (a trigram
// search): one scan of that index collects the ids of up to paging.CountHorizon+1 matches, which
// count them, and the page is read by those ids in order. When more match, it pages as Page does.
func PageFew[T any](ctx context.Context, q *bun.SelectQuery, rows *[]T, order string, p paging.PageQuery) (total int64, exact bool, err error) {
	var ids []int64
	if err := q.Clone().ColumnExpr("?TableAlias.id").Limit(paging.CountHorizon+1).Scan(ctx, &ids); err != nil {
		return 0, false, fmt.Errorf("list page: %w", err)
	}
	if len(ids) > paging.CountHorizon {
		return Page(ctx, q, rows, order, p)
	}
	if len(ids) > 0 {
		err = q.Where("?TableAlias.id IN (?)", bun.In(ids)).OrderExpr(order).Limit(p.Limit()).Offset(p.Offset()).Scan(ctx)
		if err != nil {
			return 0, false, fmt.Errorf("list page: %w", err)
		}
	}
	return int64(len(ids)), true, nil
}
