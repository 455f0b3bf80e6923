#!/usr/bin/env bash
# Docker HEALTHCHECK of the ghostsearch image.
#  - a Ray node runs in the container (`ray start` wrote <temp dir>/ray_current_cluster):
#    healthy when the cluster's GCS answers `ray health-check` (uses the same token
#    as the node: RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH / ~/.ray/auth_token);
#  - otherwise (a one-off CLI run): healthy when the project imports.
set -euo pipefail
addr_file="${RAY_TMPDIR:-/tmp/ray}/ray_current_cluster"
if [[ -s "$addr_file" ]]; then
  exec timeout 8 ray health-check --address "$(<"$addr_file")" --skip-version-check
fi
exec timeout 8 python -c "import ghostsearch"
