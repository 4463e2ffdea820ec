#!/bin/sh
# kafka-storage.sh format|...: the KRaft storage tool. Its own small heap: the
# broker's KAFKA_HEAP_OPTS are meant for the broker.
KAFKA_HEAP_OPTS=-Xmx256M KAFKA_JVM_PERFORMANCE_OPTS="-XX:+UseSerialGC -XX:TieredStopAtLevel=1" \
	exec "$(dirname "$0")/kafka-run-class.sh" kafka.tools.StorageTool "$@"
