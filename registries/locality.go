package registries

// Metadata keys of an instance's locality, as Nacos, Eureka (Spring Cloud's
// eureka.instance.metadata-map.zone) and Spring Cloud Zookeeper instances
// carry them.
const (
	MetaRegion  = "region"
	MetaZone    = "zone"
	MetaSubzone = "subzone"
)

// Locality is an Instance.Locality, "<region>/<zone>/<subzone>", or ""
// when no part is known.
func Locality(region, zone, subzone string) string {
	if region == "" && zone == "" && subzone == "" {
		return ""
	}
	return region + "/" + zone + "/" + subzone
}

// MetadataLocality is the Locality of an instance's region, zone and
// subzone metadata (MetaRegion, MetaZone, MetaSubzone).
func MetadataLocality(meta map[string]string) string {
	return Locality(meta[MetaRegion], meta[MetaZone], meta[MetaSubzone])
}
