// CoreDNS for the mini-kcm kind node image (deploy/kind/node-image/build.sh), built from CoreDNS's Go
// module at the version kubeadm asks for, with only the plug-ins a kubeadm cluster's Corefile uses (plus
// log and hosts, the usual additions). CoreDNS's own main links every plug-in, the cloud providers' SDKs
// among them; a cold build of it took about 11 minutes on 2 cores, this one a fraction of that.
//
// Plug-ins register themselves when imported; the server orders them by its own directive list.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
