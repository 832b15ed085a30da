// Package docs serves the API reference page at /api/docs: Swagger UI (swagger-ui-dist 5.35.0,
// Apache-2.0, vendored under assets/ by scripts/vendor-docs.sh) embedded in the binary, so the
// page works offline, reading /api/openapi.json, with "Try it out" against this server.
package docs

import (
	"embed"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"
)

//go:embed assets
var assets embed.FS

const page = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Resource Provisioning Service — API reference</title>
  <link rel="stylesheet" href="/api/docs/assets/swagger-ui.css">
  <style>body{margin:0} .topbar{display:none}</style>
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/api/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/api/docs/init.js"></script>
</body>
</html>`

// The initializer lives in its own file so a strict Content-Security-Policy needs no inline script.
const initJS = `window.ui = SwaggerUIBundle({
  url: "/api/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  tryItOutEnabled: true,
  persistAuthorization: true,
  displayRequestDuration: true
});`

// Register adds the page and its assets to app.
func Register(app *fiber.App) {
	csp := "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'"
	app.Get("/api/docs", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentSecurityPolicy, csp)
		c.Type("html", "utf-8")
		return c.SendString(page)
	})
	app.Get("/api/docs/init.js", func(c *fiber.Ctx) error {
		c.Type("js", "utf-8")
		return c.SendString(initJS)
	})
	app.Use("/api/docs/assets", filesystem.New(filesystem.Config{
		Root: http.FS(assets), PathPrefix: "assets", MaxAge: 86400,
	}))
}
