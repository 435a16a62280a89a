// Package eureka is the Eureka registry: it follows a Eureka server (or a set
// of peers) over its REST API and delivers, per application, an
// authoritative registries.Snapshot of its UP instances (or an error) to a
// registries.Sink, through a registries.Session. Applications map to hosts
// <application>.eureka (HostTemplate; lower-cased by translate).
//
// Rules:
//  1. One read per interval, whatever the number of applications: GET
//     apps/delta every Interval (the changes of the server's last
//     retention window, 3 min by default), and GET apps, the whole
//     registry, at the start and when rules 3, 4 or 7 ask for it. Both
//     with Accept: application/json; gzip when the server offers it.
//     Peers that read /apps and then every application one by one send N
//     requests per cycle for N applications.
//  2. A delta is applied as Eureka's own client applies it
//     (DiscoveryClient.updateDelta): ADDED and MODIFIED instances add or
//     replace the instance of their ID in their application, DELETED ones
//     remove it; an application without instances is gone. The registry
//     holds every instance the server lists, of every status and of every
//     application, the allow-list's or not (the hashcode counts them all).
//  3. After each delta the reconcile hashcode of the registry as held
//     (reconcileHashcode: instances counted per status) is compared with
//     the delta's apps__hashcode; when they differ the whole registry is
//     read (DiscoveryClient.getAndUpdateDelta's rule).
//  4. The whole registry is also read every RelistInterval, whatever the
//     hashcode says: it counts instances per status only, so one instance
//     replaced by another while a delta was missed (the bridge paused past
//     the server's retention) leaves it unchanged.
//  5. Instances: served when their status is UP and their overridden
//     status (set on the server: PUT apps/<APP>/<ID>/status) is unset,
//     UNKNOWN or UP; DOWN, STARTING, OUT_OF_SERVICE and UNKNOWN ones are
//     not. ID "<APP>/<instanceId>" (hostName when there is no instanceId);
//     address ipAddr when it is an IP, else hostName; port: port, when
//     enabled, with the protocol of metadata "protocol", else http; else
//     securePort, when enabled, as https (TLS passed through): one port per
//     instance, as every registry's but Dubbo's (servedPort says why); an
//     instance with neither, or with an enabled port outside 1-65535, is
//     invalid (skipped by translate with its reason, logged and counted);
//     labels are the metadata, raw (translate sanitizes them as every
//     registry's), less the codec's "@class"; locality
//     "<region>/<zone>/<subzone>" from the metadata region, zone and
//     subzone (Spring Cloud's eureka.instance.metadata-map.zone), the zone
//     else an Amazon data center's availability zone, its region the zone
//     less its letter. Eureka has no weight: every instance has the
//     default.
//  6. Servers are read one at a time, the one that answered last first,
//     the next on an error or when one is silent for RequestTimeout (before
//     its answer, or within its body: registries.ErrHung); a failed server
//     is logged once until it answers again. The registry is down when no
//     server answers a round: its services keep their last-known-good
//     instances (registries.Reporter.Down), it is logged once per outage
//     and counted in meshbridge_registry_errors_total; a hung or refused
//     registry is down within Interval + RequestTimeout × servers.
//  7. After an outage, or when another server answers, the whole registry
//     is read, its reads marked Relist (registries.Reporter.Reconnected: a
//     disappearance is held down by the syncer) and, for ReconnectGrace, an
//     application it omits or lists with no instance keeps its last
//     instances (a restarted server forgets instances until they renew);
//     the whole registry is read again when the grace ends.
//  8. Credentials: HTTP basic auth from Username and PasswordFile, in the
//     Authorization header only; a server URL with credentials is refused;
//     https:// servers are verified against the system roots and
//     TLS.CAFile, a CA file with no https:// server is refused.
package eureka
