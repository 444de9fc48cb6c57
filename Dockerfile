# syntax=docker/dockerfile:1
# The service as a container (docs/operators/deploy.md "Deploy"). Two stages: the build stage compiles
# TypeScript with the dev dependencies; the runtime stage holds only production dependencies,
# dist/ and the SQL migrations (read at start from src/store/migrations), and runs as a
# non-root user with the embedded database on a volume.

# A major version, never `latest`: rebuilds pick up its security releases, not a new major.
# The one `npm run test:node24` runs the suite on (docs/operators/install.md "Node versions").
ARG NODE_VERSION=24

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
# The device SDK is a workspace of the root package: npm ci needs its package.json, the build its sources.
COPY package.json package-lock.json ./
COPY packages/device-sdk/package.json ./packages/device-sdk/
# --ignore-scripts: no dependency's install script runs in the image, and none is needed
# (libsql ships its native module as prebuilt optional packages).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY packages/device-sdk ./packages/device-sdk
COPY src ./src
RUN npm run build

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
# NODE_ENV=production and HOST=0.0.0.0: without an identity provider (OWNER_JWKS_URL or
# OWNER_JWKS_FILE, with OWNER_ISSUER and OWNER_AUDIENCE) the container refuses to start, unless
# DEVELOPMENT_SIGN_IN=code asks for the one-time sign-in code its log prints (docs/operators/deploy.md).
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8787 \
    DATABASE_URL=file:/data/service.db
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/device-sdk/package.json ./packages/device-sdk/
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY src/store/migrations ./src/store/migrations
# The API reference script /docs serves (Scalar's standalone bundle, committed).
COPY vendor/scalar-api-reference ./vendor/scalar-api-reference
# The owner console's icons (Lucide SVGs, committed).
COPY vendor/lucide-icons ./vendor/lucide-icons
COPY src/console/static ./src/console/static
# The embedded database and the development identity key live in /data, owned by the
# unprivileged `node` user (uid 1000) the image ships with.
RUN mkdir -p /data && chown node:node /data
VOLUME ["/data"]
USER node
EXPOSE 8787
# The liveness probe: /healthz answers 200 without touching a credential. Node's fetch, so
# the image needs no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8787)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Node is PID 1 here: SIGTERM reaches src/main.ts, which drains requests and closes the
# database (graceful shutdown) before exiting.
CMD ["node", "dist/main.js"]
