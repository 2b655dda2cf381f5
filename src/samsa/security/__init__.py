"""Security at the broker's edge: who a connection is (authentication: TLS, SASL) and what
it may do (authorization: Kafka's ACL model). Nothing here imports the broker; the broker's
connections and handlers call into it.

* :mod:`.principal`: the Kafka principal a connection acts as (``User:alice``;
  ``User:ANONYMOUS`` on an unauthenticated PLAINTEXT listener, as in Kafka).
"""
