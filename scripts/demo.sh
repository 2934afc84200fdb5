#!/usr/bin/env bash
# The bundled example, deployed: one server and three clinics as four processes on localhost,
# over gRPC with TLS and a token per silo. Fits a Bayesian logistic regression of diabetes on the
# Pima Indians data held by three clinics (PVI), prints what a clinic agrees to send, the server's
# progress and posterior, and leaves everything under build/demo/: the agreed plan, the
# certificates, the tokens, each party's log and outputs (server/posterior.json, draws.csv,
# metrics.csv). The programs are fvi-server and fvi-client, which take the model file itself
# (docs/deployment.md, "One program per role").
# Usage: scripts/demo.sh   (after scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
demo=build/demo
data=examples/pima_logreg/data
rm -rf "$demo" && mkdir -p "$demo/certs"

model=examples/pima_logreg/pima_logreg.fvi

# 1. The plan the clinics' data owners review and agree to: what each clinic sends, and what
#    never leaves it. Each fvi-client joins only if its model's plan is this one.
./build/bin/fvic plan --json "$model" > "$demo/agreed-plan.json"

# 2. A certificate authority, the server's certificate (for 127.0.0.1), and a token per silo.
(
  cd "$demo/certs"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=fvi demo CA" -keyout ca.key -out ca.pem 2> /dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr 2> /dev/null
  printf "subjectAltName=IP:127.0.0.1,DNS:localhost\n" > san.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext \
    -out server.pem 2> /dev/null
)
: > "$demo/tokens"
for k in 1 2 3; do
  token=$(openssl rand -hex 16)
  echo "$k $token" >> "$demo/tokens"
  echo "$token" > "$demo/silo-$k.token"
done
chmod 600 "$demo/tokens" "$demo"/silo-*.token
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# 3. The server (data.json only: this model has no server data), then the three clinics, each
#    reading only data.json and its own silo-K.json.
./build/bin/fvi-server "$model" --listen "127.0.0.1:$port" --silos 3 --data "$data" --output "$demo/server" \
  --cert "$demo/certs/server.pem" --key "$demo/certs/server.key" --tokens "$demo/tokens" \
  --test "$data/test.json" --deadline 60 &
server=$!
clients=()
for k in 1 2 3; do
  ./build/bin/fvi-client "$model" --accept-plan "$demo/agreed-plan.json" --server "127.0.0.1:$port" --silo "$k" \
    --data "$data" --output "$demo/clinics" --ca "$demo/certs/ca.pem" --token-file "$demo/silo-$k.token" \
    > "$demo/clinic-$k.log" 2>&1 &
  clients+=($!)
done
trap 'kill "$server" "${clients[@]}" 2> /dev/null || true' EXIT
status=0
wait "$server" || status=$?
for pid in "${clients[@]}"; do wait "$pid" || status=$?; done
trap - EXIT
echo "demo: clinic 1's audit before it joined (its log, $demo/clinic-1.log, begins with it):"
sed -n '/^model /,/never leaves/p' "$demo/clinic-1.log" | sed 's/^/  /'
echo "demo: the clinics' logs are $demo/clinic-K.log; the server wrote $demo/server/"
exit "$status"
