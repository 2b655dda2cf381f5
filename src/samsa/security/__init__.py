"""Security at the broker's edge: who a connection is (authentication: TLS, SASL), what it
may do (authorization: Kafka's ACL model), and the limits that keep bad clients from
exhausting the broker. Nothing here imports the broker; the broker's connections and
handlers (through :mod:`samsa.broker.access`) call into it.

Who a connection is:

* :mod:`.principal`: the Kafka principal a connection acts as (``User:alice``;
  ``User:ANONYMOUS`` on an unauthenticated PLAINTEXT listener, as in Kafka).
* :mod:`.listeners`: ``listeners``, ``advertised.listeners``, the protocol map and
  per-listener settings; :mod:`.setup` builds what each listener needs to authenticate.
* :mod:`.tls`: TLS contexts from PEM files and the principal of a client certificate
  (``ssl.principal.mapping.rules``).
* :mod:`.sasl`: the SASL mechanisms and exchange; :mod:`.credentials` the salted SCRAM
  users and their stores; :mod:`.jaas` Kafka's JAAS text (PLAIN users, client logins).
* :mod:`.edge`: one connection's authentication, as the broker's connection consults it.

What it may do:

* :mod:`.acl`: Kafka's ACL model (resource and pattern types, operations, bindings, filters,
  host patterns with CIDR ranges).
* :mod:`.authorizer`: decisions with Kafka's StandardAuthorizer semantics over an index of
  the ACLs, the ACL file store, and the rate-limited denial log.

And :mod:`.limits` (connection limits, request memory), :mod:`.lists` (Kafka's LIST
settings).
"""
