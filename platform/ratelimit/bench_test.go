package ratelimit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"provisioner/platform/ratelimit"
)

func BenchmarkTakeRedis(b *testing.B) {
	rc, _ := redisClient(b, "")
	l, err := ratelimit.New(ratelimit.Options{Redis: rc, Prefix: uniquePrefix(b), Rates: map[string]string{"B": "1000000000-M"}})
	require.NoError(b, err)
	benchTake(b, l)
}

func BenchmarkTakeMemory(b *testing.B) {
	l, err := ratelimit.New(ratelimit.Options{Rates: map[string]string{"B": "1000000000-M"}})
	require.NoError(b, err)
	benchTake(b, l)
}

func benchTake(b *testing.B, l *ratelimit.Limiter) {
	ctx := context.Background()
	if _, err := l.Take(ctx, "B", "warm"); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Take(ctx, "B", "k"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.Take(ctx, "B", "k"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
