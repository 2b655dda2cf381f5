"""Security at the broker's edge: who a connection is (authentication: TLS, SASL) and what
it may do (authorization: Kafka's ACL model). Nothing here imports the broker; the broker's
connections and handlers call into it.

* :mod:`.principal`: the Kafka principal a connection acts as (``User:alice``;
  ``User:ANONYMOUS`` on an unauthenticated PLAINTEXT listener, as in Kafka).
* :mod:`.acl`: Kafka's ACL model (resource and pattern types, operations, bindings, filters,
  host patterns with CIDR ranges).
* :mod:`.authorizer`: decisions with Kafka's StandardAuthorizer semantics over an index of
  the ACLs, the ACL file store, and the rate-limited denial log.
"""
