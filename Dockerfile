# The sample voucher shop (sample-app/), one replica per container. It runs from the TypeScript
# sources through tools/ts-register.js, exactly as `npm run start:sample` does, with the
# library mapped from lib/ — no build step.
#   docker compose up --build      (three replicas + Redis, see docker-compose.yml)
FROM node:20-alpine

WORKDIR /app
ENV NODE_ENV=production

# Dependencies first, for layer caching. The Nest packages, ioredis, typescript, @nestjs/terminus
# and the OpenTelemetry SDK and Prometheus exporter (for /health and /metrics) are devDependencies
# of the library, and the shop needs them at run time: install them too (`--include=dev`, which
# NODE_ENV=production would otherwise leave out).
COPY package.json package-lock.json ./
RUN npm ci --include=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

COPY tsconfig.json ./
COPY tools/ts-register.js tools/ts-register.js
COPY lib lib
COPY sample-app sample-app

ENV PORT=3000
EXPOSE 3000
USER node
HEALTHCHECK --interval=5s --timeout=2s --retries=10 \
  CMD wget -qO- "http://127.0.0.1:${PORT}/health" >/dev/null || exit 1

# Exec form, so `docker stop`'s SIGTERM reaches node and starts the graceful shutdown
# (enableShutdownHooks). docker-compose.yml adds `init: true` so node is not PID 1.
CMD ["node", "-r", "./tools/ts-register.js", "sample-app/main.ts"]
