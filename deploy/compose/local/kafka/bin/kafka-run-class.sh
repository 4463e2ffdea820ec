#!/bin/sh
# kafka-run-class.sh CLASS ARGS...: what the distribution's script does for
# the three callers below, without its log4j and GC-log set-up (slf4j-simple
# logs to stderr). KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS and KAFKA_OPTS
# are honoured as there.
class=$1
shift
# shellcheck disable=SC2086 # the *_OPTS variables are word lists, as in Kafka's script
exec java ${KAFKA_HEAP_OPTS:--Xmx256M} ${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseSerialGC} ${KAFKA_OPTS:-} \
	-cp "${KAFKA_HOME:-/opt/kafka}/libs/*" "$class" "$@"
