// Package summary lets resource modules contribute to views that span them (an admin's per-user
// dashboard and the public platform metrics) without the view's owner importing any module.
package summary

import (
	"context"

	"go.uber.org/fx"
)

// Section is one module's part of a user's dashboard.
type Section struct {
	// Key is the dashboard field ("databases", "dnsRecords", "wfautoAccounts", "aiKeys").
	Key string
	// Items are the user's resources as the module lists them (never secrets).
	Items any
	// Total is the number of items.
	Total int
}

// DashboardContributor is implemented by every module with per-user resources.
type DashboardContributor interface {
	DashboardSection(ctx context.Context, userID int64) (Section, error)
}

// Counter contributes platform-wide counts to GET /api/metrics/platform, e.g.
// {"databases": 10, "activeDatabases": 7}. One query per table at most.
type Counter interface {
	PlatformCounts(ctx context.Context) (map[string]int64, error)
}

// AsDashboardContributor provides a module's dashboard section.
func AsDashboardContributor(f any) any {
	return fx.Annotate(f, fx.As(new(DashboardContributor)), fx.ResultTags(`group:"dashboard"`))
}

// AsCounter provides a module's platform counts.
func AsCounter(f any) any {
	return fx.Annotate(f, fx.As(new(Counter)), fx.ResultTags(`group:"platform_counts"`))
}
