// Package cluster starts the replicated servers the failover tests run on,
// without Docker, from the Apache Kafka jars the test harness resolves
// (kafkatest.KafkaLibs) and Debian's PostgreSQL binaries:
//
//   - StartKafka: n KRaft nodes, each broker and controller, one cluster id,
//     with the production settings at n = 3 (default replication factor 3,
//     min.insync.replicas 2, unclean leader election off, the internal
//     topics at RF 3 / min ISR 2); Leader and Controller find the node to
//     hurt, Kill, Stop, Cont and Restart hurt it;
//   - StartPG: one PostgreSQL server with fsync on;
//   - StartPair: a primary and a streaming hot standby (pg_basebackup -R -X
//     stream), synchronous (the standby named in synchronous_standby_names,
//     never '*', which a logical relay's connection would match) or
//     asynchronous, reached through one multi-host
//     URL (target_session_attrs=read-write) that finds the primary after a
//     promotion; KillPrimary, StopPrimary, Promote, StopStandby,
//     CutReplication and FenceOld are the faults and the remedy.
//
// Every server is stopped and its folder removed when the test ends. The
// servers listen on free ports: from the ranges TEST_CLUSTER_KAFKA_PORTS and
// TEST_CLUSTER_PG_PORTS ("first-last") when set, so that a shared machine's
// users keep to their own, otherwise wherever the kernel finds one.
//
// The servers run with fsync on: durability is what the failover tests
// judge. cluster_test.go (build tag "cluster", `make test-cluster`) shows
// each helper does what it says on real servers.
package cluster
