#!/usr/bin/env bash
# `bash scripts/pack-install-test.sh WORKDIR`: @eventmesh/client and @eventmesh/nestjs as a new user gets them.
# Builds both packages, packs them with `npm pack` into WORKDIR/tarballs, and creates a fresh NestJS app in
# WORKDIR/app (a folder outside the repo) with its own package.json: the two tarballs, and Nest, Fastify and
# TypeScript from the npm registry; nothing comes from the repo's node_modules. Its sources are the orders example
# (examples/orders/src), compiled by the app's own TypeScript. test/e2e/pack-install.e2e-spec.ts boots it against
# an instance.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${1:?usage: pack-install-test.sh WORKDIR (outside the repo)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
case "$work/" in "$ROOT"/*) echo "WORKDIR must be outside the repo ($ROOT)" >&2; exit 2 ;; esac

cd "$ROOT"
npm run --silent build -w packages/client -w packages/nestjs
rm -rf "$work/tarballs" "$work/app"
mkdir -p "$work/tarballs" "$work/app"
npm pack --silent -w packages/client -w packages/nestjs --pack-destination "$work/tarballs" >/dev/null
client=$(ls "$work"/tarballs/eventmesh-client-*.tgz)
nestjs=$(ls "$work"/tarballs/eventmesh-nestjs-*.tgz)

cp -r examples/orders/src "$work/app/src"
cd "$work/app"
cat >package.json <<JSON
{
  "name": "fresh-orders-app",
  "private": true,
  "dependencies": {
    "@eventmesh/client": "file:$client",
    "@eventmesh/nestjs": "file:$nestjs",
    "@nestjs/common": "^11.0.0",
    "@nestjs/config": "^4.0.0",
    "@nestjs/core": "^11.0.0",
    "@nestjs/platform-fastify": "^11.0.0",
    "cloudevents": "^10.0.0",
    "reflect-metadata": "^0.2.0",
    "rxjs": "^7.8.0"
  },
  "devDependencies": { "@types/node": "^20.0.0", "typescript": "~5.9.0" }
}
JSON
cat >tsconfig.json <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022", "module": "commonjs", "moduleResolution": "node", "strict": true, "skipLibCheck": true,
    "experimentalDecorators": true, "emitDecoratorMetadata": true, "rootDir": "src", "outDir": "dist", "types": ["node"]
  },
  "include": ["src"]
}
JSON
npm install --silent --no-audit --no-fund --prefer-offline
npx --no-install tsc -p tsconfig.json
echo "pack-install: app ready in $work/app"
