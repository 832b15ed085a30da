//go:build !unix

package aikeys

import "github.com/gofiber/fiber/v2"

// watchClient watches nothing where a socket cannot be peeked at without reading it.
func watchClient(*fiber.Ctx, func()) (stop func()) { return func() {} }
