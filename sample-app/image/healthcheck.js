/* global fetch, AbortSignal */
// The image's HEALTHCHECK: GET /health (the @nestjs/terminus endpoint) on this container's PORT.
// Healthy on a 200 only; bounded to 2 s. CI runs the same file against the app built without
// Docker (tools/check-image.sh).
fetch(`http://127.0.0.1:${process.env.PORT ?? 3000}/health`, {
  signal: AbortSignal.timeout(2_000),
}).then(
  (res) => process.exit(res.ok ? 0 : 1),
  () => process.exit(1),
);
