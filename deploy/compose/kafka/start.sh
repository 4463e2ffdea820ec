#!/bin/sh
# Starts the compose file's Kafka broker secured as production is, only
# without TLS (one machine, one private network): SASL SCRAM-SHA-512 on the
# INTERNAL and EXTERNAL listeners, SASL/PLAIN on the loopback-bound
# CONTROLLER listener, and the StandardAuthorizer, so each
# service can do only what the ACLs of `payments topics create --acls`
# allow. The SCRAM users (admin and one per service) are written when the
# storage is formatted, with the passwords of the mounted secrets
# /run/secrets/kafka-<user>-password.
#
# Every KAFKA_<NAME> variable becomes the broker setting <name> (lower case,
# '_' -> '.'), as the apache/kafka image does; the JAAS settings, whose names
# hold dashes, are written here.
set -eu

kafka_home=${KAFKA_HOME:-/opt/kafka}
secrets=${SECRETS_DIR:-/run/secrets}
props=${CONFIG_DIR:-/tmp}/server.properties
admin_props=${CONFIG_DIR:-/tmp}/admin.properties
: >"$props"
env | grep '^KAFKA_' | while IFS='=' read -r name value; do
	case $name in
	KAFKA_HOME | KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_LOG4J_OPTS | KAFKA_GC_LOG_OPTS | KAFKA_JMX_OPTS | KAFKA_DEBUG) continue ;;
	esac
	key=$(printf '%s' "${name#KAFKA_}" | tr 'A-Z_' 'a-z.')
	printf '%s=%s\n' "$key" "$value" >>"$props"
done

secret() { tr -d '\r\n' <"$secrets/kafka-$1-password"; }
admin=$(secret admin)
jaas="org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"$admin\";"
# The controller listener (bound to loopback) authenticates the broker's own
# requests as User:controller with SASL/PLAIN: SCRAM credentials are served
# by the controller itself, so they cannot log in to it. The password is
# drawn at each start and lives only in this container's settings: the
# broker and its controller are one process, nobody else needs it.
controller=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
{
	echo "listener.name.internal.scram-sha-512.sasl.jaas.config=$jaas"
	echo "listener.name.external.scram-sha-512.sasl.jaas.config=$jaas"
	echo "listener.name.controller.sasl.enabled.mechanisms=PLAIN"
	echo "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"controller\" password=\"$controller\" user_controller=\"$controller\";"
} >>"$props"
chmod 600 "$props"
# For the health check's command-line client.
{
	echo "security.protocol=SASL_PLAINTEXT"
	echo "sasl.mechanism=SCRAM-SHA-512"
	echo "sasl.jaas.config=$jaas"
} >"$admin_props"

set --
for user in admin transfers ledger antifraud notifications; do
	set -- "$@" --add-scram "SCRAM-SHA-512=[name=$user,password=$(secret "$user")]"
done
"$kafka_home/bin/kafka-storage.sh" format --ignore-formatted -t "$CLUSTER_ID" -c "$props" "$@"
exec "$kafka_home/bin/kafka-server-start.sh" "$props"
