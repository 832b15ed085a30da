# syntax=docker/dockerfile:1
# Builds the same binary that scripts/dev.sh runs (go run .), as a static, non-root image.
FROM golang:1.26-bookworm AS build
# The image pins GOTOOLCHAIN=local; honour go.mod's toolchain line (the standard library's fixes).
ENV GOTOOLCHAIN=auto
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X provisioner/app.Version=${VERSION}" -o /out/provisioner .

FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /app
COPY --from=build /out/provisioner /app/provisioner
COPY config/config.example.yaml /app/config/config.example.yaml
USER nonroot:nonroot
EXPOSE 5133
ENTRYPOINT ["/app/provisioner"]
CMD ["serve"]
