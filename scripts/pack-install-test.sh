#!/usr/bin/env bash
# `bash scripts/pack-install-test.sh WORKDIR`: @eventmesh/client and @eventmesh/nestjs as a new user gets them.
# Builds both packages, packs them with `npm pack` into WORKDIR/tarballs, and creates a fresh NestJS app in
# WORKDIR/app (a folder outside the repo) with its own package.json: the two tarballs, and Nest, Fastify and
# TypeScript from the npm registry; nothing comes from the repo's node_modules. Its sources are the orders example
# (examples/orders/src) and the README's "Use it from NestJS" block (src/readme-app.ts), compiled by the app's own
# TypeScript. test/e2e/pack-install.e2e-spec.ts boots it against
# an instance.
#
# The registry packages are pinned by scripts/pack-install/package-lock.json (the app's lockfile without the two
# tarballs, which npm adds from the files): the install is the same every run (a new Nest release does not change
# what the test installs) and, its tarballs in the npm cache, asks the registry nothing (`--prefer-offline`); a
# clean machine fetches them from the registry once, with retries. `PACK_INSTALL_LOCK=update` resolves the ranges
# again and writes the lockfile back (after changing the app's dependencies below).
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
# The README's "Use it from NestJS" app, as a reader copies it (its first ```ts block after that heading).
awk '/^## Use it from NestJS/ { section = 1 } section && /^```ts$/ { inside = 1; next } inside && /^```$/ { exit } inside' \
  README.md >"$work/app/src/readme-app.ts"
[ -s "$work/app/src/readme-app.ts" ] || { echo "no ts block under README's 'Use it from NestJS'" >&2; exit 1; }
lock="$ROOT/scripts/pack-install/package-lock.json"
[ "${PACK_INSTALL_LOCK:-}" = update ] || cp "$lock" "$work/app/package-lock.json"
cd "$work/app"
# The tarballs by a path relative to the app, so the lockfile is the same whatever WORKDIR is.
cat >package.json <<JSON
{
  "name": "fresh-orders-app",
  "private": true,
  "dependencies": {
    "@eventmesh/client": "file:../tarballs/$(basename "$client")",
    "@eventmesh/nestjs": "file:../tarballs/$(basename "$nestjs")",
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
# Registry URLs in the lockfile (whatever the user's npmrc says), so a locked install fetches tarballs directly.
npm install --silent --no-audit --no-fund --prefer-offline --omit-lockfile-registry-resolved=false \
  --fetch-retries=5 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=30000
if [ "${PACK_INSTALL_LOCK:-}" = update ]; then
  node -e '
    const lock = JSON.parse(require("fs").readFileSync("package-lock.json", "utf8"));
    for (const key of Object.keys(lock.packages)) if (key.startsWith("node_modules/@eventmesh/")) delete lock.packages[key];
    require("fs").writeFileSync(process.argv[1], JSON.stringify(lock, null, 2) + "\n");
  ' "$lock"
  echo "pack-install: wrote $lock"
fi
npx --no-install tsc -p tsconfig.json
echo "pack-install: app ready in $work/app"
