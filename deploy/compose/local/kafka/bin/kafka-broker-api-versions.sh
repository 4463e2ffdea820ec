#!/bin/sh
# The compose health check's probe (kafka-tools). A small heap and C1 only:
# it starts every few seconds beside the broker.
KAFKA_HEAP_OPTS=-Xmx128M KAFKA_JVM_PERFORMANCE_OPTS="-XX:+UseSerialGC -XX:TieredStopAtLevel=1" \
	exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.BrokerApiVersionsCommand "$@"
