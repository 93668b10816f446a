# The sample voucher shop (sample-app/) built as a user's own image would be: the library built
# and packed, the app compiled to JavaScript against the package, then a runtime stage with the
# app, the tarball and production dependencies only, run as the non-root `node` user.
# sample-app/image/steps.sh holds the steps; CI runs the same ones without Docker
# (tools/check-image.sh), and lints this file and docker-compose.yml (npm run lint:docker).
#   docker compose up --build      (three replicas + Redis, see docker-compose.yml)

# Node.js 24: the Active LTS line (20 is past its end of life).
FROM node:24-alpine AS build
WORKDIR /src
# Dependencies first, for layer caching; the dev toolchain stays in this stage.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json README.md LICENSE CHANGELOG.md ./
COPY lib lib
COPY sample-app sample-app
RUN sh sample-app/image/steps.sh build /out

FROM node:24-alpine
ENV NODE_ENV=production
ENV PORT=3000
WORKDIR /app
COPY --from=build /out/ ./
RUN sh steps.sh install && npm cache clean --force
USER node
EXPOSE 3000
# GET /health, the @nestjs/terminus endpoint: 200 while this replica can keep its locks.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=5 CMD ["node", "healthcheck.js"]
# Exec form, so `docker stop`'s SIGTERM reaches node and starts the graceful shutdown
# (enableShutdownHooks: running work keeps its locks up to shutdownGrace, 10 s, then releases).
# docker-compose.yml adds `init: true` so node is not PID 1, and a longer stop_grace_period.
CMD ["node", "dist/main.js"]
